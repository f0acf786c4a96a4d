// The alerting rules (prometheusAlerts), the same for both granularities (`topic` and
// `partition`). The stuck, blocked and hanging alerts read per-partition series: they need
// an LSO an open transaction pins (behind the HW, not moved since the previous cycle),
// and the exporter serves those partitions' series in both granularities. A large gap and
// a group past the LSO can also come with an LSO that moves every cycle, where `topic`
// granularity has no per-partition series: those two alerts read the per-topic series.
local promql = import 'lib/promql.libsonnet';
local text = import 'lib/text.libsonnet';

{
  prometheusAlerts+:: {
    local c = $._config,
    local cl = c.kafkaClusterLabel,
    local sel(matchers) = promql.selector(c, matchers),
    // Alerts with a `for` read their series through a bridge, so that one or two cycles in
    // which the exporter could not read them do not start their `for` over. A failed read
    // removes a series for a cycle (Prometheus marks it stale, and a plain selector returns
    // nothing); an exporter restart marks every series stale for a scrape or two. While the
    // cluster is not `healthy`, an absent series stands in with its last value within
    // pagingGapWindow (last_over_time skips stale markers); a present series always counts
    // with its current value, so "above the threshold for 5m" keeps its meaning on a
    // cluster that counts a failure in every cycle (an offline partition, a broker the
    // exporter cannot reach, a principal denied DescribeProducers). While it is healthy,
    // only the current series counts, so an episode that ended with the series gone (as
    // per-partition series go in topic granularity) resolves at once; one that ends with
    // the series gone while the cluster is not healthy resolves within the window.
    //
    // A value that is present but partial is taken as it is: the per-topic aggregates over
    // the partitions that were read (a maximum or a sum that drops, a minimum that rises),
    // a partition's hanging count that reads 0 while its transactions' coordinator could
    // not be asked. They are lower bounds (upper bounds for a minimum), documented as such:
    // an alert on them never fires wrongly, and may start its `for` over after such a cycle.
    //
    // Healthy: the exporter reports a successful cycle for the cluster
    // (kafka_lso_exporter_up 1) and counted no failure, within the window, of a stage that
    // reads the alert's series. Every stage's errors_total series exists from the start at
    // 0; without it a cluster is never healthy, and absent series are always bridged.
    // Nor is a cluster healthy during the first newOwnerCycles cycles of its owner (an
    // exporter restarted, a replica that took it over: kafka_lso_exporter_cycle_duration_seconds_count
    // starts from 0): in `topic` granularity a pinned partition's series come back a cycle
    // after the rest, once the new owner has seen its LSO stand still.
    //
    // `+ 0` drops the metric name, so both sides of `or` carry the same labels and `or`
    // keeps the current value. The threshold comes last, once: the Helm chart's override
    // replaces it there.
    local w = c.pagingGapWindow,
    // The stages whose failure removes a partition's series (and leaves its topic's
    // aggregates over the other partitions); with the group stages, a group's series; with
    // DescribeProducers and DescribeTransactions, a partition's hanging count (absent when
    // its producers could not be described, 0 when their coordinator could not say); with
    // record reads and topic configs, a group's retention margin in seconds.
    local partitionStages = ['metadata', 'log_start_offset', 'last_stable_offset', 'high_watermark'],
    local groupStages = partitionStages + ['list_groups', 'describe_groups', 'group_offsets', 'share_group_offsets'],
    local transactionStages = partitionStages + ['describe_producers', 'describe_transactions'],
    local retentionStages = groupStages + ['read_records', 'topic_configs'],
    local healthy(stages) = |||
      (
        kafka_lso_exporter_up%(s)s == 1
          and on (%(cl)s) sum by (%(cl)s) (increase(kafka_lso_exporter_errors_total%(e)s[%(w)s])) == 0
          unless on (%(cl)s) max by (%(cl)s) (kafka_lso_exporter_cycle_duration_seconds_count%(s)s) < %(n)s
      )
    ||| % { s: sel([]), e: sel(['stage=~"%s"' % std.join('|', stages)]), cl: cl, w: w, n: text.number(c.newOwnerCycles) },
    // `metric`, bridged: its current value, or while the cluster is not healthy its last
    // value within the window.
    // The replica labels are aggregated away: a series keeps its identity when another
    // replica takes its cluster over, so the alert and its `for` go on.
    local bridge(metric, stages) = std.rstripChars(|||
      (
        max without (%(r)s) (%(m)s%(s)s)
        or (
          max without (%(r)s) (last_over_time(%(m)s%(s)s[%(w)s]))
            unless on (%(cl)s) %(healthy)s
        )
      )
    ||| % { m: metric, s: sel([]), w: w, cl: cl, r: std.join(', ', c.replicaLabels), healthy: promql.indent(healthy(stages), 6) }, '\n'),
    local bridged(metric, stages, condition) = bridge(metric, stages) + ' ' + condition + '\n',
    local margin = bridge('kafka_consumergroup_topic_min_retention_margin_seconds', retentionStages),
    local retention = bridge('kafka_topic_retention_seconds', retentionStages),
    local runbook(alert) = c.runbookURLBase + alert + '.md',
    local r = std.join(', ', c.replicaLabels),

    // What the alerts on a pinned partition remember across an exporter restart or a
    // hand-over (restartMemoryWindow), keyed by the partition's LSO value as a label `lso`
    // (count_values), so that a memory can only match the LSO it was made at: the LSO only
    // grows, and a transaction that ends moves it. A partition whose LSO moved has no memory
    // at its new value; one that is no longer behind its HW has no series (topic
    // granularity) or another LSO.
    //
    // `value` per partition, with the partition's current LSO as the label `lso` (value 0
    // added), over the partitions `value` has: a subquery's inner expression. count_values
    // `without`, not `by`: Prometheus 2.42 (Debian's) drops `by` labels of count_values
    // evaluated over a range (a subquery). The right side of the match is made one series
    // per partition (`max by`), so that a second scrape job of the same exporter (other
    // `job`, `namespace` labels) cannot make the match many-to-many and the rule fail.
    local mem = c.restartMemoryWindow,
    local memStep = c.restartMemoryStep,
    local atLso(value) = std.rstripChars(|||
      (
        %(value)s
          + on (%(cl)s, topic, partition) group_left (lso)
        (0 * max by (%(cl)s, topic, partition, lso) (count_values without (%(r)s) ("lso", max without (%(r)s) (kafka_partition_last_stable_offset%(s)s) and on (%(cl)s, topic, partition) %(value)s)))
      )
    ||| % { value: value, cl: cl, r: r, s: sel([]) }, '\n'),
    // The partitions behind their HW now, with their current LSO as the label `lso`: both
    // bridged, so that the first cycles of a new owner (or a gap of a scrape or two) keep
    // the last values.
    local pinnedNow = std.rstripChars(|||
      (
        count_values without (%(r)s) (
          "lso",
          %(lso)s
        )
          and on (%(cl)s, topic, partition) %(gap)s > 0
      )
    ||| % {
      cl: cl,
      r: r,
      lso: promql.indent(bridge('kafka_partition_last_stable_offset', partitionStages), 4),
      gap: promql.indent(bridge('kafka_partition_hw_minus_lso', partitionStages), 4),
    }, '\n'),
    // How long each pinned partition's LSO has stood at its current value: from the earliest
    // moment at which any exporter's stuck clock, within restartMemoryWindow, says the LSO
    // arrived at this value (the sample's time less the clock), or the exporter's current
    // clock if it says more (it can date the LSO by a broker clock). No more than the
    // clocks it reads said: a clock that read s at time t at this LSO means the LSO stood
    // here since t - s, and, as the LSO only grows, still does while it reads this value.
    local stuckCarried = std.rstripChars(|||
      max without (lso) (
        time() - min_over_time(
          %(arrival)s[%(mem)s:%(step)s]
        )
          and on (%(cl)s, topic, partition, lso) %(pinned)s
        or
        %(current)s
      )
    ||| % {
      cl: cl,
      mem: mem,
      step: memStep,
      arrival: promql.indent(atLso('(time() - (max without (%s) (kafka_partition_lso_stuck_seconds%s) > 0))' % [r, sel([])]), 4),
      pinned: promql.indent(pinnedNow, 4),
      current: promql.indent(bridge('kafka_partition_lso_stuck_seconds', partitionStages), 2),
    }, '\n'),

    // A group's isolation as the exporter judges it (kafka_consumergroup_isolation_level, one
    // series per group, its `isolation_level` label read_committed, read_uncommitted, mixed or
    // unknown), remembered: the groups whose isolation was one of `seen` at some time within
    // isolationMemoryWindow, unless it is one of `now` at present. An exporter restarted, or
    // a replica that took the cluster over, judges every group `unknown` until it sees new
    // evidence, and its series carry other replica labels: the window and the aggregation
    // over the replica labels carry the judgement across both; a judgement the exporter
    // makes now (`now`) ends the memory at once.
    local mw = c.isolationMemoryWindow,
    local isolationRemembered(seen, now) = std.rstripChars(|||
      (
        max without (%(r)s, isolation_level) (max_over_time(kafka_consumergroup_isolation_level%(seen)s[%(mw)s])) == 1
          unless on (%(cl)s, group) (max without (%(r)s, isolation_level) (kafka_consumergroup_isolation_level%(now)s) == 1)
      )
    ||| % { r: r, cl: cl, mw: mw, seen: sel(['isolation_level=~"%s"' % seen]), now: sel(['isolation_level=~"%s"' % now]) }, '\n'),
    // Groups that have no live member now (absent, when the group could not be described,
    // is not 0).
    local withoutMembers = 'max without (%s) (kafka_consumergroup_members%s) == 0' % [r, sel([])],
    // Topics that carried transactions within transactionalTopicWindow: a partition's HW
    // ahead of its LSO, an open transaction seen by forensics, or a commit or abort marker
    // read. All three are per-topic series, there in both granularities.
    local tw = c.transactionalTopicWindow,
    local transactionalTopics = std.rstripChars(|||
      (
        max without (%(r)s) (max_over_time(kafka_topic_withheld_partitions%(s)s[%(tw)s])) > 0
        or max without (%(r)s) (max_over_time(kafka_topic_open_transactions%(s)s[%(tw)s])) > 0
        or max without (%(r)s, marker) (max_over_time(kafka_topic_transaction_markers_total%(s)s[%(tw)s])) > 0
      )
    ||| % { r: r, s: sel([]), tw: tw }, '\n'),

    // Appended to descriptions: the open transaction whose start offset is the partition's
    // last stable offset (the one holding it), when transaction forensics names it. Not
    // the one with the largest age: a live transaction behind it may be older.
    local partitionArgs = [cl + '=%[1]q', 'topic=%[2]q', 'partition=%[3]q'],
    local transactionAtLso =
      '{{ range printf `topk(1, kafka_transaction_open_info' + sel(partitionArgs)
      + ' and on (' + cl + ', topic, partition, start_offset) count_values by (' + cl + ', topic, partition)'
      + ' ("start_offset", kafka_partition_last_stable_offset' + sel(partitionArgs) + '))`'
      + ' $labels.' + cl + ' $labels.topic $labels.partition | query }} Transaction at the LSO:'
      + ' {{ if .Labels.transactional_id }}transactional id {{ .Labels.transactional_id }}, {{ end }}'
      + 'producer id {{ .Labels.producer_id }} (epoch {{ .Labels.producer_epoch }}'
      + '{{ if not .Labels.transactional_id }}, transactional id not known to the exporter{{ end }}),'
      + ' from offset {{ .Labels.start_offset }}.{{ end }}',
    // The age of the record at the LSO, when record reads measured it.
    local withheldAge =
      '{{ range printf `kafka_partition_withheld_age_seconds' + sel([cl + '=%q', 'topic=%q', 'partition=%q']) + ' > 0`'
      + ' $labels.' + cl + ' $labels.topic $labels.partition | query }} The oldest of them was written'
      + ' {{ .Value | humanizeDuration }} ago.{{ end }}',
    // The group's current status (kafka_consumergroup_status), its longest commit stall
    // and topic; a topic's retention and a group's time left on it; the coordinator moves
    // of a fenced transactional id in the same window.
    local groupStatus =
      '{{ range printf `kafka_consumergroup_status' + sel([cl + '=%q', 'group=%q']) + ' == 1`'
      + ' $labels.' + cl + ' $labels.group | query }}{{ .Labels.status }}{{ end }}',
    local longestStall =
      '{{ range printf `topk(1, kafka_consumergroup_topic_max_commit_stall_seconds' + sel([cl + '=%q', 'group=%q']) + ' > 0)`'
      + ' $labels.' + cl + ' $labels.group | query }} Its committed offsets on topic {{ .Labels.topic }}'
      + ' last moved {{ .Value | humanizeDuration }} ago (the exporter\'s clock; on first sight dated by the first record left to read).{{ end }}',
    local retentionOf =
      '{{ range printf `kafka_topic_retention_seconds' + sel([cl + '=%q', 'topic=%q']) + '`'
      + ' $labels.' + cl + ' $labels.topic | query }}{{ .Value | humanizeDuration }}{{ end }}',
    local marginOf =
      '{{ range printf `kafka_consumergroup_topic_min_retention_margin_seconds' + sel([cl + '=%q', 'group=%q', 'topic=%q']) + '`'
      + ' $labels.' + cl + ' $labels.group $labels.topic | query }}{{ .Value | humanizeDuration }}{{ end }}',
    local coordinatorMoves =
      '{{ range printf `increase(kafka_transaction_coordinator_moves_total' + sel([cl + '=%q', 'transactional_id=%q'])
      + '[' + c.fencedWindow + ']) > 0` $labels.' + cl + ' $labels.transactional_id | query }}'
      + ' Its coordinator moved in the same window (a broker restart, or leadership of __transaction_state moving):'
      + ' a fencing right after a move is usually a producer that retried through it.{{ end }}',
    // A two-phase (KIP-939) transaction among the oldest listed: its coordinator never
    // times it out.
    local twoPhase =
      '{{ range printf `kafka_coordinator_transaction_two_phase' + sel([cl + '=%q', 'transactional_id=%q', 'producer_id=%q', 'producer_epoch=%q']) + ' == 1`'
      + ' $labels.' + cl + ' $labels.transactional_id $labels.producer_id $labels.producer_epoch | query }}',
    // The group's isolation as the exporter judges it now.
    local isolationNow =
      '{{ range printf `topk(1, max by (isolation_level) (kafka_consumergroup_isolation_level' + sel([cl + '=%q', 'group=%q']) + ' == 1))`'
      + ' $labels.' + cl + ' $labels.group | query }} The exporter judges its isolation {{ .Labels.isolation_level }} now.{{ end }}',
    // The group's live members per isolation level.
    local isolationMembers =
      '{{ with printf `max by (isolation_level) (kafka_consumergroup_isolation_level_members' + sel([cl + '=%q', 'group=%q']) + ' > 0)`'
      + ' $labels.' + cl + ' $labels.group | query | sortByLabel `isolation_level` }} Live members now:'
      + '{{ range $i, $m := . }}{{ if $i }},{{ end }} {{ $m.Value }} {{ $m.Labels.isolation_level }}{{ end }}.{{ end }}',
    // The series the max_series guard limits; a feature's status and reason.
    local seriesOf =
      '{{ range printf `max(kafka_lso_exporter_series' + sel([cl + '=%q']) + ')` $labels.' + cl + ' | query }}'
      + '{{ .Value }}{{ end }}',
    local featureReason =
      '{{ range printf `topk(1, kafka_lso_exporter_feature_info' + sel([cl + '=%q', 'feature=%q', 'status!="ok"']) + ')`'
      + ' $labels.' + cl + ' $labels.feature | query }} Status {{ .Labels.status }}: {{ .Labels.reason }}{{ end }}',
    // An alert's own threshold and `for` as its annotations say them. In the Helm chart's
    // copy of the texts (annotationPlaceholders) they are placeholders, which the chart
    // fills in from the threshold and `for` it renders: an override changes both.
    local placeholders = c.annotationPlaceholders,
    local own = {
      duration(d): if placeholders then '${for}' else text.duration(d),
      number(n): if placeholders then '${threshold}' else text.number(n),
      seconds(n): if placeholders then '${threshold_seconds}' else text.seconds(n),
      percent(f): if placeholders then '${threshold_percent}' else text.number(f * 100),
    },
    local v = {
      cl: cl,
      transactionAtLso: transactionAtLso,
      withheldAge: withheldAge,
      twoPhase: twoPhase,
      seriesOf: seriesOf,
      featureReason: featureReason,
      gapThreshold: own.number(c.gapThreshold),
      gapFor: own.duration(c.gapFor),
      stuckWarning: own.seconds(c.stuckWarningSeconds),
      stuckCritical: own.seconds(c.stuckCriticalSeconds),
      blockedStuck: own.seconds(c.blockedStuckSeconds),
      readsUncommittedFor: own.duration(c.readsUncommittedFor),
      isolationMemoryWindow: text.duration(c.isolationMemoryWindow),
      transactionalTopicWindow: text.duration(c.transactionalTopicWindow),
      abortedRecordsReadWindow: text.duration(c.abortedRecordsReadWindow),
      mixedIsolationFor: own.duration(c.mixedIsolationFor),
      isolationNow: isolationNow,
      isolationMembers: isolationMembers,
      hangingFor: own.duration(c.hangingFor),
      restartMemoryWindow: text.duration(c.restartMemoryWindow),
      fencedRepeated: own.number(c.fencedRepeatedThreshold),
      clusterDownFor: own.duration(c.clusterDownFor),
      staleSeconds: own.seconds(c.staleSeconds),
      clustersUnservedFor: own.duration(c.clustersUnservedFor),
      errorsThreshold: own.number(c.errorsThreshold),
      errorsFor: own.duration(c.errorsFor),
      exporterAbsentFor: own.duration(c.exporterAbsentFor),
      seriesDroppedFor: own.duration(c.seriesDroppedFor),
      featureDownFor: own.duration(c.featureDownFor),
      commitStalledFor: own.duration(c.commitStalledFor),
      rebalanceThreshold: own.number(c.rebalanceThreshold),
      rebalanceWindow: text.duration(c.rebalanceWindow),
      rebalanceFor: own.duration(c.rebalanceFor),
      retentionRiskPercent: own.percent(c.retentionRiskFraction),
      retentionRiskFor: own.duration(c.retentionRiskFor),
      retentionRiskCritical: own.seconds(c.retentionRiskCriticalSeconds),
      lostRecordsWindow: text.duration(c.lostRecordsWindow),
      longOpenUnseen: own.seconds(c.longOpenUnseenSeconds),
      fencedWindow: text.duration(c.fencedWindow),
      groupStatus: groupStatus,
      longestStall: longestStall,
      retentionOf: retentionOf,
      marginOf: marginOf,
      coordinatorMoves: coordinatorMoves,
    },
    local describe(paragraph) = text.fold(paragraph) % v,

    // One severity per alert name: kube-prometheus-stack's default Alertmanager inhibits
    // every warning or info alert that shares its name and namespace with a critical one,
    // and every alert of the exporter carries the exporter's namespace, so a name with two
    // severities would let one partition's page mute the other's warnings everywhere.
    // Escalations are alerts of their own (KafkaLsoStuck, KafkaLsoStuckCritical).
    local alertRules = std.flattenArrays([g.rules for g in self.groups]),
    local severitiesOf(name) = std.set([rule.labels.severity for rule in alertRules if std.objectHas(rule, 'alert') && rule.alert == name]),
    local twoSeverities = [name for name in std.set([rule.alert for rule in alertRules if std.objectHas(rule, 'alert')]) if std.length(severitiesOf(name)) > 1],
    assert twoSeverities == [] : 'alerts with more than one severity (give the escalation a name of its own): ' + std.join(', ', twoSeverities),

    groups+: [
      {
        name: 'kafka-lso-exporter.transactions',
        rules: [
          {
            alert: 'KafkaLsoGapHigh',
            expr: bridged('kafka_topic_max_hw_minus_lso', partitionStages, '> ' + text.number(c.gapThreshold)),
            'for': c.gapFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.topic }}: {{ $value }} records of a partition withheld by open transactions',
              description: describe(|||
                On cluster {{ $labels.%(cl)s }}, {{ $value }} records of one partition of topic {{ $labels.topic }}
                sit between its last stable offset and its high watermark (the largest gap among the topic's
                partitions), above %(gapThreshold)s for more than %(gapFor)s. read_committed consumers cannot
                read them until the oldest open transaction in that partition commits or aborts. The
                visibility dashboard's Top partitions by withheld records names the partition while its LSO is pinned.
              |||),
              runbook_url: runbook('KafkaLsoGapHigh'),
            },
          },
          // The stuck clock as the exporters said it within restartMemoryWindow, while the
          // LSO stands at the same value (stuckCarried): an exporter restarted or a replica
          // that took the cluster over, whose clock starts again from 0 where no broker clock
          // dates the LSO, does not resolve the alert. Two names, one severity each:
          // kube-prometheus-stack's default Alertmanager inhibits a warning wherever an alert
          // of the same name and namespace is critical, on any partition of any cluster.
          {
            alert: 'KafkaLsoStuck',
            expr: stuckCarried + ' > ' + text.number(c.stuckWarningSeconds) + '\n',
            labels: { severity: 'warning' },
            annotations: {
              summary: '{{ $labels.topic }}/{{ $labels.partition }}: last stable offset stuck for {{ $value | humanizeDuration }}',
              description: describe(|||
                On cluster {{ $labels.%(cl)s }}, the last stable offset of {{ $labels.topic }}/{{ $labels.partition }}
                has not moved for {{ $value | humanizeDuration }} (more than %(stuckWarning)s) while the high watermark
                is ahead of it: a transaction has been open longer than the default transaction.timeout.ms (1 minute).
                read_committed consumers of this partition are blocked.%(transactionAtLso)s
              |||),
              runbook_url: runbook('KafkaLsoStuck'),
            },
          },
          {
            alert: 'KafkaLsoStuckCritical',
            expr: stuckCarried + ' > ' + text.number(c.stuckCriticalSeconds) + '\n',
            'for': c.stuckCriticalFor,
            labels: { severity: 'critical' },
            annotations: {
              summary: '{{ $labels.topic }}/{{ $labels.partition }}: last stable offset stuck for {{ $value | humanizeDuration }}, beyond any transaction timeout',
              description: describe(|||
                On cluster {{ $labels.%(cl)s }}, the last stable offset of {{ $labels.topic }}/{{ $labels.partition }}
                has not moved for {{ $value | humanizeDuration }}, more than %(stuckCritical)s (the broker's default
                transaction.max.timeout.ms is 15 minutes): a late or hanging transaction. It will not end
                by itself; read_committed consumers of this partition stay blocked until it is aborted.%(transactionAtLso)s
                The time counts from when an exporter first saw this LSO pinned (looking back
                %(restartMemoryWindow)s), across exporter restarts and hand-overs.
              |||),
              runbook_url: runbook('KafkaLsoStuckCritical'),
            },
          },
          // Blocked: nothing left to read below the LSO (lso_lag 0, which excludes markers
          // and aborted records) and the committed offset not past the LSO (a group past it
          // reads uncommitted and is not waiting), on a partition whose HW is ahead of an
          // LSO stuck for blockedStuckSeconds. The value is the group's hw_lag: the records
          // it waits for. The stuck clock's comparison stays last: the Helm chart's threshold
          // override replaces the number of the last comparison.
          //
          // Never for a group remembered to read uncommitted: such a group committed at the
          // LSO is reading, not waiting, and cannot be told from a blocked one by its
          // offsets. A group without live members stays blocked: jobs that assign partitions
          // themselves (Flink, Spark) commit without ever joining, and a read_committed
          // consumer that is down could read nothing more until the transaction ends either
          // (then KafkaConsumerGroupCommitStalled takes over). A mixed group (members of both isolation levels) only while
          // the exporter calls it blocked: the exporter knows which member owns which
          // partition, and does not call a partition its read_uncommitted member owns blocked.
          {
            alert: 'KafkaConsumerGroupBlockedByTransaction',
            expr: |||
              max without (%(r)s) (
                (kafka_consumergroup_hw_lag%(s)s > 0)
                  and on (%(cl)s, group, topic, partition) (kafka_consumergroup_lso_lag%(s)s == 0)
                  and on (%(cl)s, group, topic, partition) (kafka_consumergroup_committed_beyond_lso%(s)s == 0)
                  unless on (%(cl)s, group) %(readUncommitted)s
                  unless on (%(cl)s, group) (
                    %(mixed)s
                      unless on (%(cl)s, group) (max without (%(r)s) (kafka_consumergroup_status%(blocked)s) == 1)
                  )
                  and on (%(cl)s, topic, partition) (kafka_partition_hw_minus_lso%(s)s > 0)
                  and on (%(cl)s, topic, partition) (kafka_partition_lso_stuck_seconds%(s)s > %(stuck)s)
              )
            ||| % {
              s: sel([]),
              cl: cl,
              stuck: text.number(c.blockedStuckSeconds),
              r: r,
                            readUncommitted: promql.indent(isolationRemembered('read_uncommitted', 'read_committed|mixed'), 4),
              mixed: promql.indent(isolationRemembered('mixed', 'read_committed|read_uncommitted'), 6),
              blocked: sel(['status="blocked"']),
            },
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Group {{ $labels.group }} is caught up on {{ $labels.topic }}/{{ $labels.partition }} and still {{ $value }} records behind',
              description: describe(|||
                On cluster {{ $labels.%(cl)s }}, consumer group {{ $labels.group }} has read everything a
                read_committed consumer may read in {{ $labels.topic }}/{{ $labels.partition }} without committing
                past the partition's last stable offset, yet {{ $value }} records sit behind a transaction
                that has held that offset for more than %(blockedStuck)s.%(withheldAge)s
                The group is not slow: it is blocked. Scaling or restarting consumers will not help.%(transactionAtLso)s
              |||),
              runbook_url: runbook('KafkaConsumerGroupBlockedByTransaction'),
            },
          },
          // Reads uncommitted, per group and topic: committed past the topic's LSOs now (its
          // per-topic sum, bridged: a read_uncommitted group is past an LSO that moves every
          // cycle too, where `topic` granularity has no per-partition series), or judged
          // read_uncommitted or mixed by the exporter within isolationMemoryWindow (unless it
          // judges the group read_committed now) while it has offsets on a topic that carried
          // transactions within transactionalTopicWindow. The memory carries the alert and
          // its `for` across an exporter restart and a hand-over between replicas; a group
          // past the LSO between two proofs (committed at the LSO, or below it while it
          // catches up) keeps firing. Never for a group without live members whose offsets
          // moved at most once within isolationMemoryWindow: an offset reset past the LSO
          // (--to-latest while a transaction is open) is not a consumer reading. A job that
          // assigns partitions itself (Flink, Spark) commits without members, and fires.
          // The value: the most offsets the group stood past the topic's LSOs within the
          // memory window (0 when the exporter's judgement alone marks it).
          {
            alert: 'KafkaConsumerGroupReadsUncommitted',
            expr: |||
              (
                max without (%(r)s) (max_over_time(kafka_consumergroup_topic_committed_beyond_lso%(s)s[%(mw)s]))
                  and on (%(cl)s, group, topic) (
                    %(beyond)s
                  )
                or
                max without (%(r)s) (max_over_time(kafka_consumergroup_topic_committed_beyond_lso%(s)s[%(mw)s]))
                  and on (%(cl)s, topic) %(transactional)s
                  and on (%(cl)s, group) %(remembered)s
              )
              unless on (%(cl)s, group) (
                %(withoutMembers)s
                  and on (%(cl)s, group) (max without (%(r)s, topic) (changes(kafka_consumergroup_topic_committed_offset%(s)s[%(mw)s])) <= 1)
              )
            ||| % {
              r: r,
              s: sel([]),
              cl: cl,
              mw: mw,
              beyond: promql.indent(bridged('kafka_consumergroup_topic_committed_beyond_lso', groupStages, '> 0'), 6),
              transactional: promql.indent(transactionalTopics, 4),
              remembered: promql.indent(isolationRemembered('read_uncommitted|mixed', 'read_committed'), 4),
              withoutMembers: withoutMembers,
            },
            'for': c.readsUncommittedFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Group {{ $labels.group }} reads uncommitted records of {{ $labels.topic }}',
              description: describe(|||
                On cluster {{ $labels.%(cl)s }}, consumer group {{ $labels.group }} has consumed the transactional
                topic {{ $labels.topic }} with isolation.level=read_uncommitted for more than %(readsUncommittedFor)s:
                it processes records whose transaction may still be aborted, and those of transactions that were
                (KafkaConsumerGroupReadAbortedRecords counts them). {{ if gt $value 0.0 }}Within the last
                %(isolationMemoryWindow)s its committed offsets stood up to {{ $value }} offsets past the topic's last
                stable offsets (summed over its partitions).{{ else }}Its committed offsets have not been past this
                topic's last stable offsets within the last %(isolationMemoryWindow)s: the exporter's judgement of the
                group marks it (isolation.level is one setting for every topic a consumer reads).{{ end }}%(isolationNow)s
                The alert remembers for %(isolationMemoryWindow)s a group the exporter
                judged read_uncommitted or mixed, across an exporter restart or a hand-over to another replica (which
                judge it unknown until they see new evidence), unless the exporter judges it read_committed now.
                The status page / and /api/v1/stuck (isolation) name its members and the evidence.
              |||),
              runbook_url: runbook('KafkaConsumerGroupReadsUncommitted'),
            },
          },
          // Records of aborted transactions a group read (it reads uncommitted and its
          // committed offsets passed them), per group and topic. The counter's series
          // appears when the exporter first knows the group reads uncommitted, at 0, and
          // starts again at 0 on another replica (a hand-over) or after a restart, which
          // increase() takes as a reset; a series that is new within the window counts
          // with its whole value, in case it appeared above 0.
          {
            alert: 'KafkaConsumerGroupReadAbortedRecords',
            expr: |||
              sum without (%(r)s) (increase(kafka_consumergroup_aborted_records_read_total%(s)s[%(w)s])) > 0
              or
              max without (%(r)s) (kafka_consumergroup_aborted_records_read_total%(s)s unless kafka_consumergroup_aborted_records_read_total%(s)s offset %(w)s) > 0
            ||| % { r: r, s: sel([]), w: c.abortedRecordsReadWindow },
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Group {{ $labels.group }} read {{ $value | printf "%.0f" }} records of aborted transactions of {{ $labels.topic }}',
              description: describe(|||
                On cluster {{ $labels.%(cl)s }}, consumer group {{ $labels.group }} read about
                {{ $value | printf "%%.0f" }} records of aborted transactions of topic {{ $labels.topic }} in the last
                %(abortedRecordsReadWindow)s: it reads uncommitted, and its committed offsets passed records whose
                transaction was aborted. read_committed consumers never see them, so whatever the group did with
                them downstream has no counterpart there and must be compensated: reconcile by business key, not by
                offset. The status page / and /api/v1/stuck (isolation, aborted_read) list each aborted
                transaction it read, with its partition, transactional id, offset range, records and when it aborted.
              |||),
              runbook_url: runbook('KafkaConsumerGroupReadAbortedRecords'),
            },
          },
          // Members of both isolation levels in one group, as the exporter judges them.
          // Bridged through a gap of pagingGapWindow (an exporter restart), resolved at once
          // when the exporter judges the group read_committed or read_uncommitted.
          {
            alert: 'KafkaConsumerGroupMixedIsolation',
            expr: |||
              max without (%(r)s, isolation_level) (last_over_time(kafka_consumergroup_isolation_level%(mixed)s[%(w)s])) == 1
                unless on (%(cl)s, group) (max without (%(r)s, isolation_level) (kafka_consumergroup_isolation_level%(other)s) == 1)
            ||| % {
              r: r,
              cl: cl,
              w: w,
              mixed: sel(['isolation_level="mixed"']),
              other: sel(['isolation_level=~"read_committed|read_uncommitted"']),
            },
            'for': c.mixedIsolationFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Group {{ $labels.group }} has members of both isolation levels',
              description: describe(|||
                On cluster {{ $labels.%(cl)s }}, the members of consumer group {{ $labels.group }} have not all read
                with the same isolation.level for more than %(mixedIsolationFor)s: the exporter saw some read
                uncommitted (they committed past the last stable offset) and some read committed (they waited at an
                LSO an open transaction held).%(isolationMembers)s Each partition is read with the setting of the member
                that owns it, so what the group processes of a transactional topic changes with every rebalance. The
                status page / names the members on each side (client id and host). Give every member one setting: the
                Java client defaults to read_uncommitted, librdkafka to read_committed.
              |||),
              runbook_url: runbook('KafkaConsumerGroupMixedIsolation'),
            },
          },
          // The current hanging count; where it reads 0 (or is absent), 1 while the
          // partition's LSO still stands at a value at which an exporter counted a hanging
          // transaction within restartMemoryWindow: the transaction at that LSO is still open
          // and only older. An exporter restarted, or a replica that took the cluster over,
          // that can date a transaction no coordinator knows (KIP-664) by nothing but its own
          // first sight counts it hanging only transaction.max.timeout.ms later.
          {
            alert: 'KafkaTransactionHanging',
            expr: |||
              (
                %(current)s > 0
                or
                max without (lso) (
                  max_over_time(
                    %(hanging)s[%(mem)s:%(step)s]
                  )
                    and on (%(cl)s, topic, partition, lso) %(pinned)s
                )
              ) > 0
            ||| % {
              cl: cl,
              mem: mem,
              step: memStep,
              current: promql.indent(bridge('kafka_partition_hanging_transactions', transactionStages), 2),
              hanging: promql.indent(atLso('clamp_max(max without (%s) (kafka_partition_hanging_transactions%s) > 0, 1)' % [r, sel([])]), 6),
              pinned: promql.indent(pinnedNow, 6),
            },
            'for': c.hangingFor,
            labels: { severity: 'critical' },
            annotations: {
              summary: '{{ $labels.topic }}/{{ $labels.partition }}: hanging transaction, read_committed consumers blocked until it is aborted',
              description: describe(|||
                On cluster {{ $labels.%(cl)s }}, {{ $value }} open transaction(s) in {{ $labels.topic }}/{{ $labels.partition }}
                have been hanging for more than %(hangingFor)s: open longer than the broker's transaction.max.timeout.ms
                plus the exporter's hanging_margin (KIP-664), counted from the coordinator's start time, or when no
                coordinator reports them as open in this partition from the LogAppendTime of their first record or the
                exporter's first sight of them. A hanging transaction never ends by itself: the
                partition's last stable offset stays pinned until it is aborted. The exporter's /api/v1/stuck
                (or its / page, or the dashboard's Transactions holding the LSO) shows the transaction and its
                kafka-transactions.sh abort command. An exporter restarted, or a replica that took the cluster
                over, may count the transaction hanging again only later (where nothing but its own first sight
                dates it): the alert goes on while the partition's LSO stands where an exporter counted a
                transaction hanging (looking back %(restartMemoryWindow)s).%(transactionAtLso)s
              |||),
              runbook_url: runbook('KafkaTransactionHanging'),
            },
          },
          // The N oldest open transactions of the cluster (transaction_list_detail), by their
          // coordinators' listing: those that no per-partition forensics series shows
          // (kafka_transaction_open_info is there for every open transaction of a pinned
          // partition), while the cluster counts at least one unpinning transaction. Ongoing
          // ones their coordinator should have timed out, unless they are two-phase (KIP-939,
          // kafka_coordinator_transaction_two_phase 1), which it never times out; PrepareCommit,
          // PrepareAbort and PrepareEpochFence ones it has decided but cannot complete (no time
          // left is exported for them). Matched on the producer id alone: a transaction a
          // partition shows under another epoch is still seen.
          {
            alert: 'KafkaTransactionLongOpenUnseen',
            expr: |||
              max without (%(r)s) (
                kafka_coordinator_transaction_age_seconds%(s)s
                  unless on (%(cl)s, producer_id) kafka_transaction_open_info%(s)s
                  and on (%(cl)s) (kafka_cluster_unpinning_open_transactions%(s)s > 0)
              ) > %(age)s
            ||| % { s: sel([]), cl: cl, age: text.number(c.longOpenUnseenSeconds), r: std.join(', ', c.replicaLabels) },
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Transaction {{ $labels.transactional_id }} open for {{ $value | humanizeDuration }} ({{ $labels.state }}), pinning no partition the exporter samples',
              description: describe(|||
                On cluster {{ $labels.%(cl)s }}, the transaction of transactional id {{ $labels.transactional_id }}
                (producer id {{ $labels.producer_id }}, epoch {{ $labels.producer_epoch }}) has been open for
                {{ $value | humanizeDuration }} in state {{ $labels.state }} on coordinator {{ $labels.coordinator }},
                longer than %(longOpenUnseen)s, and pins no partition the exporter samples: it writes only to topics
                outside the exporter's topic filter, waits behind an older transaction, or has written nowhere yet.
                {{ if eq $labels.state "Ongoing" }}%(twoPhase)sIt is a two-phase (KIP-939)
                transaction, which its coordinator never times out: only its external transaction manager or an operator
                ends it; do not terminate it before that manager's decision is known.{{ else }}Its coordinator should
                have timed it out by now.{{ end }}{{ else }}Its
                coordinator has decided its outcome but cannot complete it: it cannot write the markers to a
                partition the transaction wrote to, usually one without a leader or below min.insync.replicas.
                Check the leaders and ISR of its partitions (kafka-transactions.sh describe --transactional-id
                {{ $labels.transactional_id }} lists them); once they are back, the coordinator completes it. Never
                abort a PrepareCommit transaction by hand: it is committed everywhere else.{{ end }}
                Partitions it wrote to are withheld from read_committed
                consumers without any per-partition alert. The exporter's /api/v1/stuck lists it under transactions.
              |||),
              runbook_url: runbook('KafkaTransactionLongOpenUnseen'),
            },
          },
          // Fencings per transactional id. The counter's series appears at the first fencing
          // the exporter sees, which increase() cannot count (it needs two samples): a
          // series that is new within the window counts too.
          {
            alert: 'KafkaTransactionFenced',
            expr: |||
              sum without (%(r)s) (increase(kafka_transaction_fencings_total%(s)s[%(w)s])) > 0
              or
              max without (%(r)s) (kafka_transaction_fencings_total%(s)s unless kafka_transaction_fencings_total%(s)s offset %(w)s) > 0
            ||| % { s: sel([]), w: c.fencedWindow, r: std.join(', ', c.replicaLabels) },
            labels: { severity: 'info' },
            annotations: {
              summary: 'Producer of transactional id {{ $labels.transactional_id }} fenced',
              description: describe(|||
                On cluster {{ $labels.%(cl)s }}, a producer of transactional id {{ $labels.transactional_id }}
                was fenced in the last %(fencedWindow)s (about {{ $value | printf "%%.0f" }} time(s)): another
                instance initialized the same transactional id with a higher epoch, or the coordinator bumped
                it, and the old instance's transaction was aborted. Expected once per restart or rebalance of an
                exactly-once application; repeated fencings mean two live instances share the id (zombies) or a
                crash loop.%(coordinatorMoves)s
              |||),
              runbook_url: runbook('KafkaTransactionFenced'),
            },
          },
          // The fencings of one transactional id within fencedWindow, when there are more than
          // a deployment causes: the warning that must arrive where KafkaTransactionFenced is
          // context (kube-prometheus-stack mutes info alerts unless a warning or critical one
          // fires in the namespace). Counted per replica and summed (each replica counts from 0
          // the fencings it sees while it serves the cluster); a series that appeared within
          // the window counts with its first value too (it appears at the first fencing seen).
          // Rounded: increase() extrapolates to the window's edges.
          {
            alert: 'KafkaTransactionFencedRepeatedly',
            expr: |||
              round(
                sum without (%(r)s) (
                  (
                    increase(kafka_transaction_fencings_total%(s)s[%(w)s])
                      + (min_over_time(kafka_transaction_fencings_total%(s)s[%(w)s]) unless kafka_transaction_fencings_total%(s)s offset %(w)s)
                  )
                  or increase(kafka_transaction_fencings_total%(s)s[%(w)s])
                )
              ) > %(n)s
            ||| % { s: sel([]), w: c.fencedWindow, r: r, n: text.number(c.fencedRepeatedThreshold) },
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Producers of transactional id {{ $labels.transactional_id }} fenced {{ $value | printf "%%.0f" }} times in %s' % text.duration(c.fencedWindow),
              description: describe(|||
                On cluster {{ $labels.%(cl)s }}, producers of transactional id {{ $labels.transactional_id }} were fenced
                about {{ $value | printf "%%.0f" }} times in the last %(fencedWindow)s, more than %(fencedRepeated)s: more
                than a deployment or a rebalance causes. Two live instances share the id (each fences the other and
                neither makes progress), an instance crash-loops, or its transactions time out (each timeout aborts
                the transaction and fences the producer).%(coordinatorMoves)s
              |||),
              runbook_url: runbook('KafkaTransactionFencedRepeatedly'),
            },
          },
        ],
      },
      {
        name: 'kafka-lso-exporter.consumer-groups',
        rules: [
          // Per group: stalled and stopped count as one condition, so that a group going
          // from one to the other keeps its `for`. The current status of any replica (the
          // replica labels aggregated away, so that a hand-over keeps the alert and its
          // `for`), or, while the group has no status series at all, the last within
          // pagingGapWindow, so that a cycle or two without it (a coordinator that did not
          // answer, an exporter restart, a hand-over) does not restart it. A group's status
          // series read 0 rather than go when its status changes: no health condition is
          // needed, and a new owner that finds the group moving ends the alert at once.
          {
            alert: 'KafkaConsumerGroupCommitStalled',
            expr: '(max without (status, %(r)s) (kafka_consumergroup_status%(s)s) or max without (status, %(r)s) (last_over_time(kafka_consumergroup_status%(s)s[%(w)s]))) == 1'
                  % { r: r, s: sel(['status=~"stalled|stopped"']), w: w },
            'for': c.commitStalledFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Group {{ $labels.group }} commits nothing while it has records to read',
              description: describe(|||
                On cluster {{ $labels.%(cl)s }}, consumer group {{ $labels.group }} has had records to read and
                committed no offset for longer than the exporter's stall_after, and has stayed so for more than
                %(commitStalledFor)s (status %(groupStatus)s).%(longestStall)s
                No open transaction blocks it (that would be KafkaConsumerGroupBlockedByTransaction): its consumers
                are gone, stuck in processing, or fail to commit.
              |||),
              runbook_url: runbook('KafkaConsumerGroupCommitStalled'),
            },
          },
          // Rebalances counted by the exporter from the group's epoch or generation; a
          // counter restarts on another replica (HA hand-over) or after a restart, which
          // increase() takes as a reset.
          {
            alert: 'KafkaConsumerGroupRebalancing',
            expr: 'max without (%s) (increase(kafka_consumergroup_rebalances_total%s[%s])) > %s'
                  % [std.join(', ', c.replicaLabels), sel([]), c.rebalanceWindow, text.number(c.rebalanceThreshold)],
            'for': c.rebalanceFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Group {{ $labels.group }} rebalanced {{ $value | printf "%%.0f" }} times in %s' % text.duration(c.rebalanceWindow),
              description: describe(|||
                On cluster {{ $labels.%(cl)s }}, consumer group {{ $labels.group }} has rebalanced more than
                %(rebalanceThreshold)s times within %(rebalanceWindow)s, for more than %(rebalanceFor)s. While a group
                rebalances, its consumers read little or nothing: members that crash and restart, exceed
                max.poll.interval.ms, or lose their session are the usual causes. The status page / lists its
                members (client id and host) and the partitions each owns.
              |||),
              runbook_url: runbook('KafkaConsumerGroupRebalancing'),
            },
          },
          // KafkaConsumerGroupRetentionRisk (warning): any group with less than the fraction
          // of the topic's retention left (a caught-up group has all of it).
          // KafkaConsumerGroupRetentionRiskCritical: less than the floor on a group
          // that is not moving and has records of the topic left (margin below the
          // retention; the comparison keeps the margin as the value). The floor's
          // comparison stays last: the Helm chart's threshold override replaces it. Both
          // the margin and the retention are bridged by their last value while absent.
          {
            alert: 'KafkaConsumerGroupRetentionRisk',
            expr: |||
              %(margin)s
                / on (%(cl)s, topic) group_left () %(retention)s
                < %(fraction)s
            ||| % { margin: margin, retention: promql.indent(retention, 2), cl: cl, fraction: text.number(c.retentionRiskFraction) },
            'for': c.retentionRiskFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Group {{ $labels.group }}: {{ $value | humanizePercentage }} of the retention of {{ $labels.topic }} left before unconsumed records are deleted',
              description: describe(|||
                On cluster {{ $labels.%(cl)s }}, the oldest record of topic {{ $labels.topic }} that consumer group
                {{ $labels.group }} has not consumed may be deleted by retention in %(marginOf)s
                ({{ $value | humanizePercentage }} of the topic's retention of %(retentionOf)s, below
                %(retentionRiskPercent)s%% for more than %(retentionRiskFor)s). A lower bound: deletion takes whole
                segments. Unless the group catches up, it will lose records (KafkaConsumerGroupLostRecords).
              |||),
              runbook_url: runbook('KafkaConsumerGroupRetentionRisk'),
            },
          },
          {
            alert: 'KafkaConsumerGroupRetentionRiskCritical',
            expr: |||
              (
                %(margin)s
                  < on (%(cl)s, topic) group_left () %(retention)s
                and on (%(cl)s, group) (last_over_time(kafka_consumergroup_status%(status)s[%(w)s]) == 1)
              ) < %(floor)s
            ||| % {
              margin: promql.indent(margin, 2),
              retention: promql.indent(retention, 4),
              cl: cl,
              w: w,
              status: sel(['status=~"stalled|stopped|blocked"']),
              floor: text.number(c.retentionRiskCriticalSeconds),
            },
            'for': c.retentionRiskCriticalFor,
            labels: { severity: 'critical' },
            annotations: {
              summary: 'Group {{ $labels.group }} does not move and its unconsumed records of {{ $labels.topic }} may be deleted in {{ $value | humanizeDuration }}',
              description: describe(|||
                On cluster {{ $labels.%(cl)s }}, consumer group {{ $labels.group }} is %(groupStatus)s and the oldest
                record of topic {{ $labels.topic }} it has not consumed may be deleted by retention (%(retentionOf)s)
                in {{ $value | humanizeDuration }}, less than %(retentionRiskCritical)s. A lower bound: deletion takes
                whole segments. The group will lose records unless it moves again before then.
              |||),
              runbook_url: runbook('KafkaConsumerGroupRetentionRiskCritical'),
            },
          },
          {
            alert: 'KafkaConsumerGroupLostRecords',
            expr: 'max without (%s) (max_over_time(kafka_consumergroup_topic_lost_records%s[%s])) > 0'
                  % [std.join(', ', c.replicaLabels), sel([]), c.lostRecordsWindow],
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Group {{ $labels.group }} lost {{ $value }} records of {{ $labels.topic }} to retention',
              description: describe(|||
                On cluster {{ $labels.%(cl)s }}, retention deleted records of topic {{ $labels.topic }} before consumer
                group {{ $labels.group }} committed past them: in the last %(lostRecordsWindow)s its committed offsets
                were up to {{ $value }} offsets below the log start (summed over the topic's partitions). Unless its
                consumers had already fetched them, the group never processed them; its consumers skip to the log
                start (auto.offset.reset=earliest) or fail (none).
              |||),
              runbook_url: runbook('KafkaConsumerGroupLostRecords'),
            },
          },
        ],
      },
      {
        name: 'kafka-lso-exporter.health',
        rules: [
          {
            alert: 'KafkaLsoExporterClusterDown',
            // Bridged by its last value within pagingGapWindow: a failed scrape or an
            // exporter restart (every series stale for a scrape or two) does not restart
            // the `for`. A cluster that is back reads 1 at once. The replica labels are
            // aggregated away, the current value of any replica first: a cluster handed
            // over to another replica ([ha]) keeps its alert and its `for`.
            expr: '(max without (%(r)s) (kafka_lso_exporter_up%(s)s) or max without (%(r)s) (last_over_time(kafka_lso_exporter_up%(s)s[%(w)s]))) == 0'
                  % { s: sel([]), w: w, r: std.join(', ', c.replicaLabels) },
            'for': c.clusterDownFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'kafka-lso-exporter cannot reach cluster {{ $labels.%s }}' % cl,
              description: describe(|||
                The exporter's sampling cycles have not reached cluster {{ $labels.%(cl)s }} for %(clusterDownFor)s.
                Its partition and group series are absent, so transaction alerts for it cannot fire.
              |||),
              runbook_url: runbook('KafkaLsoExporterClusterDown'),
            },
          },
          {
            alert: 'KafkaLsoExporterStale',
            // The last success's time, not a value, so the age stays true through a gap.
            // An owner that has not succeeded yet (an exporter restarted, or a replica that
            // took the cluster over, while the cluster is down) has no such series: the
            // newest success any replica reported within restartMemoryWindow stands in, while
            // some replica reports the cluster (kafka_lso_exporter_up, bridged through a
            // scrape or two), so that the alert goes on through the hand-over, and ends
            // within pagingGapWindow for a cluster removed from the configuration.
            expr: |||
              time() - (
                max without (%(r)s) (kafka_lso_exporter_last_success_timestamp_seconds%(s)s)
                or
                max without (%(r)s) (max_over_time(kafka_lso_exporter_last_success_timestamp_seconds%(s)s[%(mem)s]))
                  and on (%(cl)s) max by (%(cl)s) (last_over_time(kafka_lso_exporter_up%(s)s[%(w)s]))
              ) > %(t)s
            ||| % { s: sel([]), w: w, mem: mem, cl: cl, t: text.number(c.staleSeconds), r: r },
            'for': c.staleFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'kafka-lso-exporter has no fresh sample of cluster {{ $labels.%s }}' % cl,
              description: describe(|||
                The last successful sampling cycle of cluster {{ $labels.%(cl)s }} ended
                {{ $value | humanizeDuration }} ago, more than %(staleSeconds)s.
              |||),
              runbook_url: runbook('KafkaLsoExporterStale'),
            },
          },
          // [ha]: clusters the replicas' configuration names that no replica serves now (a
          // replica frozen or cut off from the coordinator after its membership ran out,
          // replicas that cannot agree, a coordinating cluster down). Their series are
          // absent everywhere, so KafkaLsoExporterClusterDown has nothing to read. A
          // replica that cannot be scraped counts as serving nothing. Without [ha] there are
          // no such series and the alert cannot fire.
          {
            alert: 'KafkaLsoExporterClustersUnserved',
            expr: 'max by (group) (kafka_lso_exporter_ha_clusters%(s)s) - sum by (group) (kafka_lso_exporter_ha_serving_clusters%(s)s) > 0'
                  % { s: sel([]) },
            'for': c.clustersUnservedFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'kafka-lso-exporter: {{ $value }} cluster(s) of coordination group {{ $labels.group }} served by no replica',
              description: describe(|||
                The replicas of coordination group {{ $labels.group }} have served {{ $value }} fewer clusters than their
                configuration names for more than %(clustersUnservedFor)s. A cluster that is down is reported up 0 by
                the replicas that cannot reach it (KafkaLsoExporterClusterDown fires for it); any other cluster
                not served has no series, and no alert about it can fire. /readyz of each replica names what it serves.
              |||),
              runbook_url: runbook('KafkaLsoExporterClustersUnserved'),
            },
          },
          // rate() over errorsRateWindow needs no bridge: the window spans a scrape or two
          // missing, and counts through the counter's reset when the exporter restarts.
          // Refusals (an ACL, a broker lacking an API, credentials) are left out: the
          // feature they switch off pages as KafkaLsoExporterFeatureDown, once. Where no
          // refusal series exists (an older exporter), nothing is left out.
          {
            alert: 'KafkaLsoExporterErrors',
            expr: |||
              (
                sum by (%(cl)s, stage) (rate(kafka_lso_exporter_errors_total%(s)s[%(w)s]))
                  - (
                    sum by (%(cl)s, stage) (rate(kafka_lso_exporter_request_refusals_total%(s)s[%(w)s]))
                    or sum by (%(cl)s, stage) (rate(kafka_lso_exporter_errors_total%(s)s[%(w)s])) * 0
                  )
              ) > %(t)s
            ||| % { cl: cl, s: sel([]), w: c.errorsRateWindow, t: text.number(c.errorsThreshold) },
            'for': c.errorsFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'kafka-lso-exporter keeps failing at {{ $labels.stage }} on cluster {{ $labels.%s }}' % cl,
              description: describe(|||
                Sampling of cluster {{ $labels.%(cl)s }} has failed at stage {{ $labels.stage }} for
                %(errorsFor)s ({{ $value | humanize }} failures per second, above %(errorsThreshold)s). The affected series are absent.
              |||),
              runbook_url: runbook('KafkaLsoExporterErrors'),
            },
          },
          // The exporter itself gone: dead, never scraped, or its scrapes failing. Its build
          // info is always there while it is scraped; absent() has nothing but the selector's
          // equality matchers for labels, so the selector should name its scrape job.
          {
            alert: 'KafkaLsoExporterAbsent',
            expr: 'absent(kafka_lso_exporter_build_info%s)' % promql.selector({ kafkaLsoExporterSelector: c.exporterAbsentSelector }, []),
            'for': c.exporterAbsentFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'kafka-lso-exporter is not scraped{{ with $labels.job }} (job {{ . }}){{ end }}: no alert about Kafka transactions can fire',
              description: describe(|||
                Prometheus has scraped no kafka-lso-exporter{{ with $labels.job }} of job {{ . }}{{ end }}{{ with $labels.namespace }}
                in namespace {{ . }}{{ end }} for more than %(exporterAbsentFor)s: it is not running (a crash loop, a pod that
                cannot be scheduled, a failed rollout), or Prometheus cannot scrape it (service discovery, a NetworkPolicy,
                the scrape's TLS or credentials). Every other alert of kafka-lso-exporter is blind meanwhile: their series
                are absent, and KafkaLsoExporterClusterDown has no series to evaluate.
              |||),
              runbook_url: runbook('KafkaLsoExporterAbsent'),
            },
          },
          // The max_series guard at work: whole groups' offset series left out. Bridged like
          // KafkaLsoExporterClusterDown across a restart.
          {
            alert: 'KafkaLsoExporterSeriesDropped',
            expr: '(max without (%(r)s) (kafka_lso_exporter_series_dropped%(s)s) or max without (%(r)s) (last_over_time(kafka_lso_exporter_series_dropped%(s)s[%(w)s]))) > 0'
                  % { s: sel([]), w: w, r: std.join(', ', c.replicaLabels) },
            'for': c.seriesDroppedFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'kafka-lso-exporter leaves {{ $value }} series of cluster {{ $labels.%s }} out: more than its max_series' % cl,
              description: describe(|||
                For more than %(seriesDroppedFor)s, the exporter has left {{ $value }} series of cluster {{ $labels.%(cl)s }} out
                of /metrics: with them it would serve more than the cluster's max_series (it serves %(seriesOf)s now). They
                are the offset and lag series, per partition and per topic, of whole consumer groups outside priority_groups;
                the alerts on those groups cannot fire. The status page / and the JSON API still show every group. Raise
                max_series, name the groups that matter in priority_groups, or narrow the cluster's groups filter.
              |||),
              runbook_url: runbook('KafkaLsoExporterSeriesDropped'),
            },
          },
          // A feature the configuration asks for that does not work: an ACL missing, a broker
          // too old, credentials refused. A feature turned off has no feature_up series. The
          // status and reason come from kafka_lso_exporter_feature_info in the description,
          // not as labels: a reason names the broker's error, and a changed text would start
          // the alert and its `for` over. Bridged like KafkaLsoExporterClusterDown.
          {
            alert: 'KafkaLsoExporterFeatureDown',
            expr: '(max without (%(r)s) (kafka_lso_exporter_feature_up%(s)s) or max without (%(r)s) (last_over_time(kafka_lso_exporter_feature_up%(s)s[%(w)s]))) == 0'
                  % { s: sel([]), w: w, r: std.join(', ', c.replicaLabels) },
            'for': c.featureDownFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'kafka-lso-exporter: {{ $labels.feature }} does not work on cluster {{ $labels.%s }}' % cl,
              description: describe(|||
                On cluster {{ $labels.%(cl)s }}, the exporter's {{ $labels.feature }} has not worked for more than
                %(featureDownFor)s although the configuration asks for it.%(featureReason)s The series that need it are
                absent and the alerts that read them cannot fire. The exporter picks it up again without a restart once
                the cause is gone (an ACL granted, the brokers upgraded); turn the feature off in the configuration if
                it is not wanted.
              |||),
              runbook_url: runbook('KafkaLsoExporterFeatureDown'),
            },
          },
        ],
      },
    ],
  },
}
