// Everything a user of the mixin may want to change: label names, the selector of the
// exporter's series, alert thresholds and durations, runbook links, dashboard settings.
// Override in your own jsonnet:
//
//   (import 'github.com/kafka-lso-exporter/kafka-lso-exporter/mixin/mixin.libsonnet') + {
//     _config+:: { kafkaLsoExporterSelector: 'job="kafka-lso"', gapThreshold: 20000 },
//   }
{
  _config+:: {
    // Label matchers added to every query of the rules and dashboards: those of the
    // exporter's scrape job. The default matches the jobs the project's manifests give it:
    // deploy/kubernetes's ServiceMonitor (job="kafka-lso-exporter", the Service's name),
    // the Helm chart's ServiceMonitor (the release's full name, "<release>-kafka-lso-exporter"
    // or the release name where it contains kafka-lso-exporter) and PodMonitor
    // ("<namespace>/<full name>"). Set your own where the job is named otherwise, e.g.
    // 'job="kafka-lso"' or 'job="kafka-lso-exporter", namespace="monitoring"'; '' selects
    // every series of these names, whoever serves them.
    kafkaLsoExporterSelector: 'job=~".*kafka-lso-exporter.*"',

    // The label naming the Kafka cluster on every series of the exporter (the cluster's
    // `name` in the exporter's configuration). Named clusterLabel up to 0.1.0.
    kafkaClusterLabel: 'kafka_cluster',

    // Several Kubernetes or Prometheus clusters in one data source (Thanos, Mimir, Cortex),
    // told apart by clusterLabel, the label your Prometheus servers add as an external
    // label: showMultiCluster adds a `cluster` variable to the dashboards (after the data
    // source) and selects every query by it. Off: no such variable, no such matcher. The
    // rules are evaluated where one cluster's series are (each cluster's Prometheus, or a
    // ruler per tenant), as the other mixins' are.
    showMultiCluster: false,
    clusterLabel: 'cluster',

    // The window of the recording rules' rates and catch-up estimate (prometheusRules);
    // the exporter's own is groups.rate_window (5m by default).
    rateWindow: '5m',

    // Labels that name the exporter replica a series came from (Prometheus' `instance`,
    // the Prometheus Operator's `pod`). Alerts with a `for` aggregate them away, so that a
    // cluster handed from one replica to another ([ha]) keeps its alerts and their `for`.
    replicaLabels: ['instance', 'pod'],

    // KafkaLsoGapHigh: records between a partition's LSO and its high watermark.
    gapThreshold: 5000,
    gapFor: '5m',
    // KafkaLsoStuck (warning): seconds a partition's LSO has not moved while the HW is
    // ahead of it, longer than the default transaction.timeout.ms allows (60 s), with margin.
    // KafkaLsoStuckCritical: longer than the broker's default transaction.max.timeout.ms
    // (15 min). Two names, not one name with two severities: kube-prometheus-stack's default
    // Alertmanager inhibits a warning wherever an alert of the same name and namespace is
    // critical, and every alert of the exporter carries the exporter's namespace.
    stuckWarningSeconds: 180,
    stuckCriticalSeconds: 900,
    // How long the critical one must hold before it pages.
    stuckCriticalFor: '2m',
    // KafkaLsoStuck, KafkaLsoStuckCritical and KafkaTransactionHanging remember, per
    // partition and LSO value, what the exporter said within this window: the longest stuck
    // clock (as the time the LSO arrived at that value) and whether a transaction was
    // counted hanging. While the partition's LSO still stands at that value, behind its HW,
    // the alerts go on from there. An exporter that restarts, or a replica that takes the
    // cluster over, starts the stuck clock of a partition again from 0 where nothing dates
    // the LSO (a CreateTime topic without transaction forensics, a transaction no
    // coordinator knows any more: KIP-664's hanging ones), and counts such a transaction
    // hanging only once it has seen it open for transaction.max.timeout.ms itself; the
    // memory keeps those alerts firing meanwhile, whatever the exporter can recover. Once
    // the LSO moves, the memory of the old value no longer matches. Longer than the
    // thresholds, so that the new exporter's own clock takes over before the memory ends;
    // restarts more often than that for longer than the window end it.
    restartMemoryWindow: '1h',
    // The resolution of that memory (the step of its subquery): the arrival time it
    // remembers is this much late at most.
    restartMemoryStep: '1m',
    // A cluster's series are bridged (pagingGapWindow) during the first cycles of a new
    // owner, an exporter restarted or a replica that took the cluster over: in `topic`
    // granularity a pinned partition's series come back one cycle later (the LSO must be
    // seen standing still), and without the bridge the alerts on them would resolve for
    // that cycle. The owner's cycles are counted by kafka_lso_exporter_cycle_duration_seconds_count
    // (a new owner's starts from 0); an exporter without that series is not told apart.
    newOwnerCycles: 3,
    // KafkaConsumerGroupBlockedByTransaction: seconds the LSO a caught-up group waits on
    // has been stuck.
    blockedStuckSeconds: 120,
    // KafkaConsumerGroupReadsUncommitted: how long a group must stay past the LSO, or
    // be known to read uncommitted on a transactional topic, before the alert fires.
    readsUncommittedFor: '5m',
    // How long the alerts remember a group's isolation (kafka_consumergroup_isolation_level):
    // KafkaConsumerGroupReadsUncommitted keeps firing for a group the exporter proved to
    // read uncommitted (or mixed), and KafkaConsumerGroupBlockedByTransaction stays quiet
    // for it, this long after the exporter last said so, unless the exporter has since
    // found the group reading committed. An exporter restarted, or a replica that took the
    // cluster over, knows nothing of a group's isolation until it sees new evidence (a
    // read_uncommitted group must commit past an LSO again); the memory bridges that.
    isolationMemoryWindow: '1h',
    // KafkaConsumerGroupReadsUncommitted: a topic is transactional if, within this window,
    // one of its partitions had its HW ahead of its LSO (kafka_topic_withheld_partitions),
    // the exporter saw an open transaction in it (kafka_topic_open_transactions, needs
    // forensics) or read a commit or abort marker (kafka_topic_transaction_markers_total).
    transactionalTopicWindow: '1h',
    // KafkaConsumerGroupReadAbortedRecords: the window over which records of aborted
    // transactions a group read (kafka_consumergroup_aborted_records_read_total) count;
    // the alert fires for this long after the last of them.
    abortedRecordsReadWindow: '1h',
    // KafkaConsumerGroupMixedIsolation: how long a group must have members of both
    // isolation levels (kafka_consumergroup_isolation_level{isolation_level="mixed"}).
    mixedIsolationFor: '5m',
    // KafkaTransactionHanging: how long a partition must hold a hanging transaction.
    hangingFor: '5m',
    // Every alert with a `for` bridges gaps in its series shorter than this window, so
    // that they do not reset its `for`: a failed read (a partition's leader that did not
    // answer, a group coordinator that failed) removes series for a cycle or two, and an
    // exporter restart marks every series stale for a scrape or two. While the cluster
    // is not healthy (kafka_lso_exporter_up not 1, or a failure counted in
    // kafka_lso_exporter_errors_total within this window), an absent series stands in
    // with its last value within it; a present series always counts with its current
    // value. An episode that ends while the cluster is healthy resolves at once; one that
    // ends with its series gone while it is not resolves within this window. Longer than
    // two scrape intervals.
    pagingGapWindow: '2m',
    // KafkaConsumerGroupCommitStalled: how long a group must stay `stalled` or `stopped`
    // (kafka_consumergroup_status). The exporter calls a group stalled once it has had
    // records to read and committed nothing for its stall_after (default 5m), so with the
    // defaults the alert fires after 10 minutes without a commit: twice the consumers'
    // default max.poll.interval.ms, past which a live consumer stuck in one poll has
    // already left the group.
    commitStalledFor: '5m',
    // KafkaConsumerGroupRebalancing: a group that rebalances more than this many times
    // within rebalanceWindow (kafka_consumergroup_rebalances_total), for rebalanceFor: a
    // rebalance storm (consumers that crash-loop, exceed max.poll.interval.ms, or are
    // scaled up and down), in which the group reads little. A rolling restart of three
    // consumers is about six rebalances of a classic group (each leaves and joins), so the
    // default fires only on more.
    rebalanceThreshold: 10,
    rebalanceWindow: '10m',
    rebalanceFor: '5m',
    // Time left before retention may delete the oldest record a group has not consumed
    // (kafka_consumergroup_topic_min_retention_margin_seconds).
    // KafkaConsumerGroupRetentionRisk (warning): less than this fraction of the topic's
    // retention left, whatever the group's status (7 days: 42 hours ahead; 1 day: 6 hours;
    // 1 hour: 15 minutes). A caught-up group always has the whole retention left and never
    // fires.
    retentionRiskFraction: 0.25,
    retentionRiskFor: '5m',
    // KafkaConsumerGroupRetentionRiskCritical: less than this many seconds left on a group
    // that is not moving (status stalled, stopped or blocked) and has records of the topic
    // left to read: the time
    // an on-call engineer needs to restart consumers or end the transaction. The fraction
    // alone comes too late on topics kept for hours; this floor pages as soon as such a
    // group stops on a topic kept for less than an hour.
    retentionRiskCriticalSeconds: 3600,
    retentionRiskCriticalFor: '2m',
    // KafkaConsumerGroupLostRecords: the window over which any record deleted before the
    // group committed past it counts. A group whose consumers reset to the log start
    // (auto.offset.reset=earliest) reads lost records > 0 for a cycle or two only; the
    // window keeps that visible to rule evaluations slower than the scrape, and the alert
    // firing for this long after the loss.
    lostRecordsWindow: '10m',
    // KafkaTransactionLongOpenUnseen: seconds a transaction that pins no exported partition
    // (kafka_coordinator_transaction_age_seconds, one of the transaction_list_detail oldest)
    // has been open: the broker's default transaction.max.timeout.ms (15 min) plus the
    // exporter's default hanging_margin (1 min). Its coordinator should have ended it.
    longOpenUnseenSeconds: 960,
    // KafkaTransactionFenced (info): the window over which a fencing counts; the alert fires
    // for this long after the last one. Info, as a single fencing after a deployment is
    // expected: kube-prometheus-stack's InfoInhibitor mutes it unless a warning or critical
    // alert fires in the namespace.
    fencedWindow: '15m',
    // KafkaTransactionFencedRepeatedly (warning): more than this many fencings of one
    // transactional id within fencedWindow: two live instances sharing the id (zombies), a
    // crash loop, transactions that time out. A rolling restart fences each id once or twice.
    fencedRepeatedThreshold: 3,
    // KafkaLsoExporterClusterDown: how long a cluster must stay unreachable.
    clusterDownFor: '2m',
    // KafkaLsoExporterStale: seconds since the last successful cycle; 45 s is 3 sampling
    // intervals at the default interval of 15 s (use 3 x your interval).
    staleSeconds: 45,
    staleFor: '1m',
    // KafkaLsoExporterClustersUnserved ([ha]): how long a cluster may be served by no
    // replica. A hand-over takes the session timeout plus a cycle or two (about 15 s at
    // the defaults); a coordinator failing over a few seconds more.
    clustersUnservedFor: '2m',
    // KafkaLsoExporterErrors: failures per second of one stage, over errorsRateWindow,
    // for errorsFor.
    errorsThreshold: 0,
    errorsRateWindow: '5m',
    errorsFor: '15m',
    // KafkaLsoExporterAbsent: how long Prometheus may have no kafka_lso_exporter_build_info
    // of the exporter (dead, never scraped, or its scrapes failing) before the alert fires;
    // while it is absent, no other alert of the exporter can fire.
    exporterAbsentFor: '5m',
    // The matchers of that one query, which must name the exporter's scrape job (by default
    // kafkaLsoExporterSelector's: the alert also says when that selector matches no job);
    // with none, the alert fires only when no kafka-lso-exporter at all is scraped. The Helm
    // chart fills in its own job and namespace (prometheusRule.exporterSelector).
    exporterAbsentSelector: self.kafkaLsoExporterSelector,
    // KafkaLsoExporterSeriesDropped: how long the max_series guard may leave series out.
    seriesDroppedFor: '15m',
    // KafkaLsoExporterFeatureDown: how long a feature the configuration asks for may not
    // work (kafka_lso_exporter_feature_up 0) before the alert fires.
    featureDownFor: '10m',

    // Internal: the annotations of the Helm chart's copy (files/alert-texts.yaml) name
    // an alert's own threshold and `for` by placeholders the chart fills in from its
    // values, so that an overridden number reaches the text as well. Leave false.
    annotationPlaceholders: false,

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

    // clusterLabel named the Kafka cluster's label up to 0.1.0; it is now the multi-cluster
    // label of the other mixins, and kafkaClusterLabel names the Kafka cluster's.
    assert self.clusterLabel != self.kafkaClusterLabel :
           'clusterLabel (%s) names the label of your Prometheus or Kubernetes clusters (showMultiCluster); the Kafka cluster\'s label is kafkaClusterLabel' % self.clusterLabel,
  },
}
