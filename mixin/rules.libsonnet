// prometheusRules: recording rules for how fast each group closes its lag, from
// Prometheus's side, over Prometheus's window (rateWindow) rather than the exporter's own
// (groups.rate_window): the consumption rate of a group on a topic, the production rate of
// the topic's last stable offset, and the catch-up estimate of a read_committed group.
// The exporter serves the same as kafka_consumergroup_topic_consume_rate, _produce_rate
// and _catchup_seconds; tests/ops_e2e.rs checks that both agree on a steady workload.
//
// deriv(), not rate(): the sums of offsets are gauges that go back on an offset reset or
// a log truncation, which rate() would read as a counter reset (a spike of the whole
// value). The replica labels are aggregated away, so that an [ha] hand-over keeps one
// series. Offsets count commit and abort markers, as the exporter's rates do; the lag is
// in records, so on a transactional topic the estimate is an approximation.
local promql = import 'lib/promql.libsonnet';

{
  prometheusRules+:: {
    local c = $._config,
    local cl = c.kafkaClusterLabel,
    local sel(matchers) = promql.selector(c, matchers),
    local r = std.join(', ', c.replicaLabels),
    local w = c.rateWindow,
    local consume = 'kafka_consumergroup_topic:committed_offset:deriv' + w,
    local produce = 'kafka_topic:last_stable_offset:deriv' + w,
    groups+: [
      {
        name: 'kafka-lso-exporter.rates',
        rules: [
          {
            record: consume,
            expr: 'max without (%s) (deriv(kafka_consumergroup_topic_committed_offset%s[%s]))' % [r, sel([]), w],
          },
          {
            record: produce,
            expr: 'max without (%s) (deriv(kafka_topic_last_stable_offset%s[%s]))' % [r, sel([]), w],
          },
          {
            record: 'kafka_consumergroup_topic:lso_lag_catchup_seconds:deriv' + w,
            expr: |||
              max without (%(r)s) (kafka_consumergroup_topic_lso_lag%(s)s)
                / (%(consume)s - on (%(cl)s, topic) group_left () %(produce)s)
              > 0
            ||| % { r: r, s: sel([]), consume: consume, produce: produce, cl: cl },
          },
        ],
      },
    ],
  },
}
