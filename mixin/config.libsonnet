// Everything a user of the mixin may want to change: label names, the selector of the
// exporter's series, alert thresholds and durations, runbook links, dashboard settings.
// Override in your own jsonnet:
//
//   (import 'kafka-lso-exporter-mixin/mixin.libsonnet') + {
//     _config+:: { kafkaLsoExporterSelector: 'job="kafka-lso-exporter"', gapThreshold: 20000 },
//   }
{
  _config+:: {
    // The label naming the Kafka cluster on every series of the exporter.
    clusterLabel: 'kafka_cluster',

    // Label matchers added to every query of the alerts and dashboards, e.g.
    // 'job="kafka-lso-exporter"' or 'job=~"kafka-lso.*", namespace="monitoring"'. Empty:
    // none, every series of these names is the exporter's.
    kafkaLsoExporterSelector: '',

    // KafkaLsoGapHigh: records between a partition's LSO and its high watermark.
    gapThreshold: 5000,
    gapFor: '5m',
    // KafkaLsoStuck: seconds a partition's LSO has not moved while the HW is ahead of it.
    // warning: longer than the default transaction.timeout.ms allows (60 s), with margin;
    // critical: longer than the broker's default transaction.max.timeout.ms (15 min).
    stuckWarningSeconds: 180,
    stuckCriticalSeconds: 900,
    // How long the critical one must hold before it pages.
    stuckCriticalFor: '2m',
    // KafkaConsumerGroupBlockedByTransaction: seconds the LSO a caught-up group waits on
    // has been stuck.
    blockedStuckSeconds: 120,
    // KafkaConsumerGroupReadsUncommitted: how long a group must stay past the LSO.
    readsUncommittedFor: '5m',
    // KafkaTransactionHanging: how long a partition must hold a hanging transaction.
    hangingFor: '5m',
    // Paging (critical) alerts read their series through last_over_time over this window,
    // so that a gap in the series shorter than it (an exporter restart: a scrape or two
    // missing) does not reset their `for`. Longer than two scrape intervals.
    pagingGapWindow: '2m',
    // KafkaLsoExporterClusterDown: how long a cluster must stay unreachable.
    clusterDownFor: '2m',
    // KafkaLsoExporterStale: seconds since the last successful cycle; 45 s is 3 sampling
    // intervals at the default interval of 15 s (use 3 x your interval).
    staleSeconds: 45,
    staleFor: '1m',
    // KafkaLsoExporterErrors: failures per second of one stage, over errorsRateWindow,
    // for errorsFor.
    errorsThreshold: 0,
    errorsRateWindow: '5m',
    errorsFor: '15m',

    // runbook_url of each alert: this followed by <alert name>.md.
    runbookURLBase: 'https://github.com/kafka-lso-exporter/kafka-lso-exporter/blob/main/docs/runbooks/',

    // Grafana dashboards. The tags also link the dashboards to each other.
    dashboardUIDs: {
      visibility: 'kafka-lso-visibility',
      consumerGroups: 'kafka-lso-consumer-groups',
      exporterHealth: 'kafka-lso-exporter-health',
    },
    dashboardTags: ['kafka', 'kafka-lso-exporter'],
    dashboardRefresh: '30s',
    dashboardPeriod: 'now-1h',
    dashboardTimezone: 'browser',
  },
}
