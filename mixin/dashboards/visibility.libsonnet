local grafana = import '../lib/grafana.libsonnet';
local promql = import '../lib/promql.libsonnet';
local text = import '../lib/text.libsonnet';

{
  grafanaDashboards+:: {
    local c = $._config,
    local g = grafana.new(c),
    local q = promql.new(c).fmt,

    'kafka-lso-visibility.json':
      g.dashboard(
        uid=c.dashboardUIDs.visibility,
        title='Kafka transactional visibility',
        description='Which partitions open transactions withhold from read_committed consumers, by how much, since when, and which consumer groups they block.',
        variables=[g.variables.datasource, g.variables.kafkaCluster, g.variables.topic, g.variables.group, g.variables.partition],
        panels=[
          {
            id: 1,
            type: 'stat',
            title: 'Partitions withheld',
            description: 'Partitions whose high watermark is ahead of their last stable offset: an open transaction hides records from read_committed consumers there. Blank means the exporter reaches none of the selected clusters.',
            datasource: g.datasource,
            gridPos: { x: 0, y: 0, w: 4, h: 4 },
            fieldConfig: {
              defaults: {
                unit: 'short',
                color: { mode: 'thresholds' },
                thresholds: {
                  mode: 'absolute',
                  steps: [
                    { color: 'green', value: null },
                    { color: 'orange', value: 1 },
                  ],
                },
                mappings: [],
                decimals: 0,
              },
              overrides: [],
            },
            options: {
              reduceOptions: {
                calcs: ['lastNotNull'],
                fields: '',
                values: false,
              },
              colorMode: 'background',
              graphMode: 'none',
              justifyMode: 'auto',
              orientation: 'auto',
              textMode: 'auto',
              wideLayout: true,
              showPercentChange: false,
            },
            targets: [
              g.target('A', q('sum(kafka_topic_withheld_partitions%(topic)s)'), legend='__auto'),
            ],
          },
          {
            id: 2,
            type: 'stat',
            title: 'Records withheld',
            description: 'Sum of HW - LSO over the selected partitions: records that exist but that read_committed consumers cannot read yet. Read from the per-topic offset sums, the same in both granularities; a topic with a partition the last cycle could not sample is left out for that cycle.',
            datasource: g.datasource,
            gridPos: { x: 4, y: 0, w: 4, h: 4 },
            fieldConfig: {
              defaults: {
                unit: 'short',
                color: { mode: 'thresholds' },
                thresholds: {
                  mode: 'absolute',
                  steps: [
                    { color: 'green', value: null },
                    { color: 'orange', value: c.gapThreshold },
                  ],
                },
                mappings: [],
                decimals: 0,
              },
              overrides: [],
            },
            options: {
              reduceOptions: {
                calcs: ['lastNotNull'],
                fields: '',
                values: false,
              },
              colorMode: 'background',
              graphMode: 'area',
              justifyMode: 'auto',
              orientation: 'auto',
              textMode: 'auto',
              wideLayout: true,
              showPercentChange: false,
            },
            targets: [
              g.target('A', q('sum(kafka_topic_high_watermark%(topic)s - kafka_topic_last_stable_offset%(topic)s)'), legend='__auto'),
            ],
          },
          {
            id: 3,
            type: 'stat',
            title: 'Longest stuck LSO',
            description: 'The longest time a last stable offset has stood still while the high watermark is ahead. Transactions time out after 60 s by default and 15 min at most: past that, suspect a hanging transaction. Measured by the exporter from the cycle that saw the LSO move; after an exporter restart it is rebuilt from the coordinator\'s start time of the transaction at the LSO, or without transaction forensics from the age of the oldest withheld record.',
            datasource: g.datasource,
            gridPos: { x: 8, y: 0, w: 4, h: 4 },
            fieldConfig: {
              defaults: {
                unit: 's',
                color: { mode: 'thresholds' },
                thresholds: {
                  mode: 'absolute',
                  steps: [
                    { color: 'green', value: null },
                    { color: 'yellow', value: 60 },
                    { color: 'orange', value: c.stuckWarningSeconds },
                    { color: 'red', value: c.stuckCriticalSeconds },
                  ],
                },
                mappings: [],
                decimals: 0,
              },
              overrides: [],
            },
            options: {
              reduceOptions: {
                calcs: ['lastNotNull'],
                fields: '',
                values: false,
              },
              colorMode: 'background',
              graphMode: 'area',
              justifyMode: 'auto',
              orientation: 'auto',
              textMode: 'auto',
              wideLayout: true,
              showPercentChange: false,
            },
            targets: [
              g.target('A', q('max(kafka_topic_max_lso_stuck_seconds%(topic)s)'), legend='__auto'),
            ],
          },
          {
            id: 4,
            type: 'stat',
            title: 'Groups blocked',
            description: 'Consumer groups blocked by an open transaction: nothing left to read below the LSO (LSO lag 0), not committed past it, on a partition whose LSO an open transaction pins below the high watermark. See the table below.',
            datasource: g.datasource,
            gridPos: { x: 12, y: 0, w: 4, h: 4 },
            fieldConfig: {
              defaults: {
                unit: 'short',
                color: { mode: 'thresholds' },
                thresholds: {
                  mode: 'absolute',
                  steps: [
                    { color: 'green', value: null },
                    { color: 'orange', value: 1 },
                  ],
                },
                mappings: [],
                decimals: 0,
              },
              overrides: [],
            },
            options: {
              reduceOptions: {
                calcs: ['lastNotNull'],
                fields: '',
                values: false,
              },
              colorMode: 'background',
              graphMode: 'none',
              justifyMode: 'auto',
              orientation: 'auto',
              textMode: 'auto',
              wideLayout: true,
              showPercentChange: false,
            },
            targets: [
              g.target('A', q(|||
                count(count by (%(c)s, group) (
                  (kafka_consumergroup_hw_lag%(groupTopic)s > 0)
                  and on (%(c)s, group, topic, partition) (kafka_consumergroup_lso_lag%(groupTopic)s == 0)
                  and on (%(c)s, group, topic, partition) (kafka_consumergroup_committed_beyond_lso%(groupTopic)s == 0)
                  and on (%(c)s, topic, partition) (kafka_partition_hw_minus_lso%(topic)s > 0 and kafka_partition_lso_stuck_seconds%(topic)s > 0)
                ))
                or
                0 * count(kafka_lso_exporter_up%(kafkaCluster)s == 1)
              |||), legend='__auto'),
            ],
          },
          {
            id: 5,
            type: 'stat',
            title: 'Groups reading uncommitted',
            description: 'Consumer groups that committed offsets past the LSO: they consume with read_uncommitted and process records whose transaction may still abort.',
            datasource: g.datasource,
            gridPos: { x: 16, y: 0, w: 4, h: 4 },
            fieldConfig: {
              defaults: {
                unit: 'short',
                color: { mode: 'thresholds' },
                thresholds: {
                  mode: 'absolute',
                  steps: [
                    { color: 'green', value: null },
                    { color: 'orange', value: 1 },
                  ],
                },
                mappings: [],
                decimals: 0,
              },
              overrides: [],
            },
            options: {
              reduceOptions: {
                calcs: ['lastNotNull'],
                fields: '',
                values: false,
              },
              colorMode: 'background',
              graphMode: 'none',
              justifyMode: 'auto',
              orientation: 'auto',
              textMode: 'auto',
              wideLayout: true,
              showPercentChange: false,
            },
            targets: [
              g.target('A', q(|||
                count(count by (%(c)s, group) (
                  kafka_consumergroup_topic_committed_beyond_lso%(groupTopic)s > 0
                ))
                or
                0 * count(kafka_lso_exporter_up%(kafkaCluster)s == 1)
              |||), legend='__auto'),
            ],
          },
          {
            id: 6,
            type: 'stat',
            title: 'Data age',
            description: 'Time since the last sampling cycle that reached the cluster (worst of the selected clusters). Above %s (KafkaLsoExporterStale; 3 intervals at the default 15 s) the numbers on this dashboard are stale.' % text.seconds(c.staleSeconds),
            datasource: g.datasource,
            gridPos: { x: 20, y: 0, w: 4, h: 4 },
            fieldConfig: {
              defaults: {
                unit: 's',
                color: { mode: 'thresholds' },
                thresholds: {
                  mode: 'absolute',
                  steps: [
                    { color: 'green', value: null },
                    { color: 'orange', value: c.staleSeconds },
                  ],
                },
                mappings: [],
                noValue: 'No data from the exporter',
                decimals: 0,
              },
              overrides: [],
            },
            options: {
              reduceOptions: {
                calcs: ['lastNotNull'],
                fields: '',
                values: false,
              },
              colorMode: 'background',
              graphMode: 'none',
              justifyMode: 'auto',
              orientation: 'auto',
              textMode: 'auto',
              wideLayout: true,
              showPercentChange: false,
            },
            targets: [
              g.target('A', q('max(time() - kafka_lso_exporter_last_success_timestamp_seconds%(kafkaCluster)s)'), legend='__auto'),
            ],
          },
          {
            id: 7,
            type: 'table',
            title: 'Withheld partitions',
            description: 'Every partition where an open transaction pins the LSO below the high watermark: the LSO has not moved since the previous cycle. (A partition whose LSO moves every cycle under a stream of short transactions counts in Partitions withheld but is not listed.) HW is what read_uncommitted consumers can read, LSO what read_committed consumers can read; the gap is what they wait for. LSO stuck for is how long the exporter has seen the LSO stand still (it can read up to one interval short; after an exporter restart it is rebuilt from the coordinator\'s transaction start time or from the withheld age). Oldest withheld record is the age of the record at the LSO, from its timestamp: how stale the newest data of a caught-up read_committed consumer is. It needs no transaction forensics. Click a partition to see its history below. Transactional id at the LSO: the open transaction whose first offset is the LSO, the one to end (empty while the exporter has no transaction forensics for the partition; the exporter\'s /api/v1/stuck has the abort command).',
            datasource: g.datasource,
            gridPos: { x: 0, y: 4, w: 24, h: 9 },
            fieldConfig: {
              defaults: {
                unit: 'short',
                decimals: 0,
                color: { mode: 'thresholds' },
                thresholds: {
                  mode: 'absolute',
                  steps: [
                    { color: 'green', value: null },
                  ],
                },
                mappings: [],
                custom: {
                  align: 'auto',
                  cellOptions: { type: 'auto' },
                  inspect: false,
                  filterable: true,
                },
                noValue: 'No partition is withheld by an open transaction',
              },
              overrides: [
                {
                  matcher: { id: 'byName', options: 'partition' },
                  properties: [
                    {
                      id: 'links',
                      value: [
                        {
                          title: 'Show HW vs LSO of this partition',
                          url: g.partitionLinkURL,
                        },
                      ],
                    },
                  ],
                },
                {
                  matcher: { id: 'byName', options: 'Withheld (HW - LSO)' },
                  properties: [
                    {
                      id: 'thresholds',
                      value: {
                        mode: 'absolute',
                        steps: [
                          { color: 'green', value: null },
                          { color: 'orange', value: c.gapThreshold },
                        ],
                      },
                    },
                    {
                      id: 'custom.cellOptions',
                      value: { type: 'color-text' },
                    },
                  ],
                },
                {
                  matcher: { id: 'byName', options: 'LSO stuck for' },
                  properties: [
                    { id: 'unit', value: 's' },
                    { id: 'decimals', value: 0 },
                    {
                      id: 'thresholds',
                      value: {
                        mode: 'absolute',
                        steps: [
                          { color: 'green', value: null },
                          { color: 'yellow', value: 60 },
                          { color: 'orange', value: c.stuckWarningSeconds },
                          { color: 'red', value: c.stuckCriticalSeconds },
                        ],
                      },
                    },
                    {
                      id: 'custom.cellOptions',
                      value: { type: 'color-background', mode: 'basic' },
                    },
                  ],
                },
                {
                  matcher: { id: 'byName', options: 'Stuck since' },
                  properties: [
                    { id: 'unit', value: 'dateTimeAsIso' },
                  ],
                },
                {
                  matcher: { id: 'byName', options: 'Oldest withheld record' },
                  properties: [
                    { id: 'unit', value: 's' },
                    { id: 'decimals', value: 0 },
                    {
                      id: 'thresholds',
                      value: {
                        mode: 'absolute',
                        steps: [
                          { color: 'green', value: null },
                          { color: 'yellow', value: 60 },
                          { color: 'orange', value: c.stuckWarningSeconds },
                          { color: 'red', value: c.stuckCriticalSeconds },
                        ],
                      },
                    },
                    {
                      id: 'custom.cellOptions',
                      value: { type: 'color-background', mode: 'basic' },
                    },
                  ],
                },
                {
                  matcher: { id: 'byName', options: 'Transactional id at the LSO' },
                  properties: [
                    {
                      id: 'mappings',
                      value: [
                        {
                          type: 'special',
                          options: {
                            match: 'empty',
                            result: { text: '(not known: see /api/v1/stuck)', index: 0 },
                          },
                        },
                      ],
                    },
                  ],
                },
              ],
            },
            options: {
              showHeader: true,
              cellHeight: 'sm',
              footer: {
                show: false,
                reducer: ['sum'],
                countRows: false,
                fields: '',
              },
              sortBy: [
                { displayName: 'LSO stuck for', desc: true },
              ],
            },
            targets: [
              g.tableTarget('A', q(|||
                max by (%(c)s, topic, partition) (
                  kafka_partition_high_watermark%(topic)s
                  and on (%(c)s, topic, partition) (kafka_partition_hw_minus_lso%(topic)s > 0 and kafka_partition_lso_stuck_seconds%(topic)s > 0)
                )
              |||)),
              g.tableTarget('B', q(|||
                max by (%(c)s, topic, partition) (
                  kafka_partition_last_stable_offset%(topic)s
                  and on (%(c)s, topic, partition) (kafka_partition_hw_minus_lso%(topic)s > 0 and kafka_partition_lso_stuck_seconds%(topic)s > 0)
                )
              |||)),
              g.tableTarget('C', q(|||
                max by (%(c)s, topic, partition) (
                  kafka_partition_hw_minus_lso%(topic)s > 0 and kafka_partition_lso_stuck_seconds%(topic)s > 0
                )
              |||)),
              g.tableTarget('D', q(|||
                max by (%(c)s, topic, partition) (
                  kafka_partition_lso_stuck_seconds%(topic)s
                  and on (%(c)s, topic, partition) (kafka_partition_hw_minus_lso%(topic)s > 0 and kafka_partition_lso_stuck_seconds%(topic)s > 0)
                )
              |||)),
              g.tableTarget('E', q(|||
                max by (%(c)s, topic, partition) (
                  (time() - kafka_partition_lso_stuck_seconds%(topic)s) * 1000
                  and on (%(c)s, topic, partition) (kafka_partition_hw_minus_lso%(topic)s > 0 and kafka_partition_lso_stuck_seconds%(topic)s > 0)
                )
              |||)),
              g.tableTarget('F', q(|||
                max by (%(c)s, topic, partition, transactional_id, producer_id) (
                  (kafka_partition_hw_minus_lso%(topic)s > 0 and kafka_partition_lso_stuck_seconds%(topic)s > 0)
                  * on (%(c)s, topic, partition) group_left (transactional_id, producer_id)
                  topk by (%(c)s, topic, partition) (1,
                    kafka_transaction_open_info%(topic)s
                    and on (%(c)s, topic, partition, start_offset)
                    count_values by (%(c)s, topic, partition) ("start_offset", kafka_partition_last_stable_offset%(topic)s)
                  )
                )
              |||)),
              g.tableTarget('G', q(|||
                max by (%(c)s, topic, partition) (
                  kafka_partition_withheld_age_seconds%(topic)s
                  and on (%(c)s, topic, partition) (kafka_partition_hw_minus_lso%(topic)s > 0 and kafka_partition_lso_stuck_seconds%(topic)s > 0)
                )
              |||)),
            ],
            transformations: [
              { id: 'merge', options: {} },
              {
                id: 'organize',
                options: {
                  excludeByName: { Time: true, 'Value #F': true },
                  indexByName: {
                    [c.kafkaClusterLabel]: 0,
                    topic: 1,
                    partition: 2,
                    'Value #A': 3,
                    'Value #B': 4,
                    'Value #C': 5,
                    'Value #D': 6,
                    'Value #E': 7,
                    'Value #G': 8,
                    transactional_id: 9,
                    producer_id: 10,
                    'Value #F': 11,
                  },
                  renameByName: {
                    'Value #A': 'HW',
                    'Value #B': 'LSO',
                    'Value #C': 'Withheld (HW - LSO)',
                    'Value #D': 'LSO stuck for',
                    'Value #E': 'Stuck since',
                    transactional_id: 'Transactional id at the LSO',
                    producer_id: 'Producer id',
                    'Value #G': 'Oldest withheld record',
                  },
                },
              },
            ],
          },
          {
            id: 14,
            type: 'table',
            title: 'Transactions holding the LSO',
            description: 'Every open transaction in a partition whose LSO is pinned (behind its HW and not moved since the previous cycle), as the partition leader (DescribeProducers) and the transaction coordinator report it. "At the LSO" marks the oldest one of each partition, the one whose start offset is the LSO: while it is open, read_committed consumers of the partition read nothing newer, whatever the others do. Open for counts from the coordinator\'s start time of the transaction; when no coordinator knows the producer (a hanging transaction), from the producer\'s last write (a lower bound). To abort one: kafka-transactions.sh --bootstrap-server BROKER abort --topic TOPIC --partition PARTITION --start-offset START_OFFSET (the exporter\'s / page and /api/v1/stuck print it); see the runbooks before aborting a transaction whose producer is alive.',
            datasource: g.datasource,
            gridPos: { x: 0, y: 13, w: 24, h: 8 },
            fieldConfig: {
              defaults: {
                unit: 'short',
                decimals: 0,
                color: { mode: 'thresholds' },
                thresholds: {
                  mode: 'absolute',
                  steps: [
                    { color: 'green', value: null },
                  ],
                },
                mappings: [],
                custom: {
                  align: 'auto',
                  cellOptions: { type: 'auto' },
                  inspect: false,
                  filterable: true,
                },
                noValue: 'No open transaction holds an LSO',
              },
              overrides: [
                {
                  matcher: { id: 'byName', options: 'partition' },
                  properties: [
                    {
                      id: 'links',
                      value: [
                        {
                          title: 'Show HW vs LSO of this partition',
                          url: g.partitionLinkURL,
                        },
                      ],
                    },
                  ],
                },
                {
                  matcher: { id: 'byName', options: 'Open for' },
                  properties: [
                    { id: 'unit', value: 's' },
                    { id: 'decimals', value: 0 },
                    {
                      id: 'thresholds',
                      value: {
                        mode: 'absolute',
                        steps: [
                          { color: 'green', value: null },
                          { color: 'yellow', value: 60 },
                          { color: 'orange', value: c.stuckWarningSeconds },
                          { color: 'red', value: c.stuckCriticalSeconds },
                        ],
                      },
                    },
                    {
                      id: 'custom.cellOptions',
                      value: { type: 'color-background', mode: 'basic' },
                    },
                  ],
                },
                {
                  matcher: { id: 'byName', options: 'transactional_id' },
                  properties: [
                    {
                      id: 'mappings',
                      value: [
                        {
                          type: 'special',
                          options: {
                            match: 'empty',
                            result: { text: '(not known: see /api/v1/stuck)', index: 0 },
                          },
                        },
                      ],
                    },
                  ],
                },
                {
                  matcher: { id: 'byName', options: 'At the LSO' },
                  properties: [
                    {
                      id: 'mappings',
                      value: [
                        {
                          type: 'value',
                          options: {
                            '1': { text: 'yes', color: 'orange', index: 0 },
                          },
                        },
                      ],
                    },
                    {
                      id: 'custom.cellOptions',
                      value: { type: 'color-text' },
                    },
                  ],
                },
              ],
            },
            options: {
              showHeader: true,
              cellHeight: 'sm',
              footer: {
                show: false,
                reducer: ['sum'],
                countRows: false,
                fields: '',
              },
              sortBy: [
                { displayName: 'Open for', desc: true },
              ],
            },
            targets: [
              g.tableTarget('A', q(|||
                max by (%(c)s, topic, partition, transactional_id, producer_id, producer_epoch, start_offset) (
                  kafka_transaction_open_age_seconds%(topic)s
                  and on (%(c)s, topic, partition) (kafka_partition_lso_stuck_seconds%(topic)s > 0)
                )
              |||)),
              g.tableTarget('B', q(|||
                max by (%(c)s, topic, partition, transactional_id, producer_id, producer_epoch, start_offset) (
                  kafka_transaction_open_info%(topic)s
                  and on (%(c)s, topic, partition, start_offset)
                  count_values by (%(c)s, topic, partition) ("start_offset", kafka_partition_last_stable_offset%(topic)s)
                  and on (%(c)s, topic, partition) (kafka_partition_lso_stuck_seconds%(topic)s > 0)
                )
              |||)),
            ],
            transformations: [
              { id: 'merge', options: {} },
              {
                id: 'organize',
                options: {
                  excludeByName: { Time: true },
                  indexByName: {
                    [c.kafkaClusterLabel]: 0,
                    topic: 1,
                    partition: 2,
                    transactional_id: 3,
                    producer_id: 4,
                    producer_epoch: 5,
                    start_offset: 6,
                    'Value #A': 7,
                    'Value #B': 8,
                  },
                  renameByName: { 'Value #A': 'Open for', 'Value #B': 'At the LSO' },
                },
              },
            ],
          },
          {
            id: 15,
            type: 'timeseries',
            title: 'Hanging transactions per topic',
            description: 'Open transactions that no transaction coordinator reports as ongoing in their partition, or that have been open longer than the broker\'s transaction.max.timeout.ms plus the exporter\'s hanging_margin (KIP-664). A hanging transaction never ends by itself: its partitions stay pinned until it is aborted (KafkaTransactionHanging; the table above has the transactions). 0 while there is none.',
            datasource: g.datasource,
            gridPos: { x: 0, y: 21, w: 12, h: 8 },
            fieldConfig: {
              defaults: {
                unit: 'short',
                color: { mode: 'palette-classic' },
                custom: {
                  drawStyle: 'line',
                  lineInterpolation: 'linear',
                  lineWidth: 1,
                  fillOpacity: 0,
                  gradientMode: 'none',
                  showPoints: 'never',
                  pointSize: 4,
                  spanNulls: false,
                  axisPlacement: 'auto',
                  axisLabel: '',
                  stacking: { mode: 'none', group: 'A' },
                  thresholdsStyle: { mode: 'dashed' },
                  lineStyle: { fill: 'solid' },
                },
                thresholds: {
                  mode: 'absolute',
                  steps: [
                    { color: 'green', value: null },
                    { color: 'red', value: 1 },
                  ],
                },
                mappings: [],
                min: 0,
                decimals: 0,
              },
              overrides: [],
            },
            options: {
              legend: {
                showLegend: true,
                displayMode: 'table',
                placement: 'bottom',
                calcs: ['lastNotNull', 'max'],
              },
              tooltip: { mode: 'multi', sort: 'desc' },
            },
            targets: [
              g.target('A', q(|||
                max by (%(c)s, topic) (kafka_topic_hanging_transactions%(topic)s)
              |||), legend=q('{{topic}} ({{%(c)s}})')),
            ],
          },
          {
            id: 16,
            type: 'timeseries',
            title: 'Oldest open transaction per topic',
            description: 'Age of the oldest open transaction among the topic\'s pinned partitions, from its coordinator\'s start time (when no coordinator knows it, from the producer\'s last write). Dashed lines: 1 minute (default transaction.timeout.ms), %s (KafkaLsoStuck), %s (KafkaLsoStuckCritical; the broker\'s default transaction.max.timeout.ms is 15 minutes: past it plus hanging_margin, a transaction counts as hanging). 0 when no transaction is open.' % [text.seconds(c.stuckWarningSeconds), text.seconds(c.stuckCriticalSeconds)],
            datasource: g.datasource,
            gridPos: { x: 12, y: 21, w: 12, h: 8 },
            fieldConfig: {
              defaults: {
                unit: 's',
                color: { mode: 'palette-classic' },
                custom: {
                  drawStyle: 'line',
                  lineInterpolation: 'linear',
                  lineWidth: 1,
                  fillOpacity: 0,
                  gradientMode: 'none',
                  showPoints: 'never',
                  pointSize: 4,
                  spanNulls: false,
                  axisPlacement: 'auto',
                  axisLabel: '',
                  stacking: { mode: 'none', group: 'A' },
                  thresholdsStyle: { mode: 'dashed' },
                  lineStyle: { fill: 'solid' },
                },
                thresholds: {
                  mode: 'absolute',
                  steps: [
                    { color: 'green', value: null },
                    { color: 'yellow', value: 60 },
                    { color: 'orange', value: c.stuckWarningSeconds },
                    { color: 'red', value: c.stuckCriticalSeconds },
                  ],
                },
                mappings: [],
                min: 0,
              },
              overrides: [],
            },
            options: {
              legend: {
                showLegend: true,
                displayMode: 'table',
                placement: 'bottom',
                calcs: ['lastNotNull', 'max'],
              },
              tooltip: { mode: 'multi', sort: 'desc' },
            },
            targets: [
              // Partitions whose LSO is pinned have their series in both granularities; a
              // topic without any reads 0.
              g.target('A', q(|||
                max by (%(c)s, topic) (
                  kafka_partition_oldest_transaction_age_seconds%(topic)s
                  and on (%(c)s, topic, partition) (kafka_partition_lso_stuck_seconds%(topic)s > 0)
                )
                or
                max by (%(c)s, topic) (0 * kafka_topic_open_transactions%(topic)s)
              |||), legend=q('{{topic}} ({{%(c)s}})')),
            ],
          },
          {
            id: 8,
            type: 'timeseries',
            title: 'Top partitions by withheld records',
            description: 'The 10 partitions with the most records between LSO and high watermark, over time. A line that keeps rising is a transaction that stays open while producers keep writing.',
            datasource: g.datasource,
            gridPos: { x: 0, y: 29, w: 8, h: 8 },
            fieldConfig: {
              defaults: {
                unit: 'short',
                color: { mode: 'palette-classic' },
                custom: {
                  drawStyle: 'line',
                  lineInterpolation: 'linear',
                  lineWidth: 1,
                  fillOpacity: 0,
                  gradientMode: 'none',
                  showPoints: 'never',
                  pointSize: 4,
                  spanNulls: false,
                  axisPlacement: 'auto',
                  axisLabel: '',
                  stacking: { mode: 'none', group: 'A' },
                  thresholdsStyle: { mode: 'dashed' },
                  lineStyle: { fill: 'solid' },
                },
                thresholds: {
                  mode: 'absolute',
                  steps: [
                    { color: 'green', value: null },
                    { color: 'orange', value: c.gapThreshold },
                  ],
                },
                mappings: [],
                min: 0,
                decimals: 0,
              },
              overrides: [],
            },
            options: {
              legend: {
                showLegend: true,
                displayMode: 'table',
                placement: 'bottom',
                calcs: ['lastNotNull', 'max'],
              },
              tooltip: { mode: 'multi', sort: 'desc' },
            },
            targets: [
              g.target('A', q('topk(10, kafka_partition_hw_minus_lso%(topic)s > 0 and kafka_partition_lso_stuck_seconds%(topic)s > 0)'), legend=q('{{topic}}/{{partition}} ({{%(c)s}})')),
            ],
          },
          {
            id: 9,
            type: 'timeseries',
            title: 'Top partitions by stuck LSO time',
            description: 'How long the LSO of the 10 most affected partitions has stood still. Dashed lines: 1 minute (default transaction timeout), %s (KafkaLsoStuck), %s (KafkaLsoStuckCritical, beyond the broker\'s default transaction.max.timeout.ms). The line ends when the transaction does.' % [text.seconds(c.stuckWarningSeconds), text.seconds(c.stuckCriticalSeconds)],
            datasource: g.datasource,
            gridPos: { x: 8, y: 29, w: 8, h: 8 },
            fieldConfig: {
              defaults: {
                unit: 's',
                color: { mode: 'palette-classic' },
                custom: {
                  drawStyle: 'line',
                  lineInterpolation: 'linear',
                  lineWidth: 1,
                  fillOpacity: 0,
                  gradientMode: 'none',
                  showPoints: 'never',
                  pointSize: 4,
                  spanNulls: false,
                  axisPlacement: 'auto',
                  axisLabel: '',
                  stacking: { mode: 'none', group: 'A' },
                  thresholdsStyle: { mode: 'dashed' },
                  lineStyle: { fill: 'solid' },
                },
                thresholds: {
                  mode: 'absolute',
                  steps: [
                    { color: 'green', value: null },
                    { color: 'yellow', value: 60 },
                    { color: 'orange', value: c.stuckWarningSeconds },
                    { color: 'red', value: c.stuckCriticalSeconds },
                  ],
                },
                mappings: [],
                min: 0,
              },
              overrides: [],
            },
            options: {
              legend: {
                showLegend: true,
                displayMode: 'table',
                placement: 'bottom',
                calcs: ['lastNotNull', 'max'],
              },
              tooltip: { mode: 'multi', sort: 'desc' },
            },
            targets: [
              g.target('A', q(|||
                topk(10,
                  kafka_partition_lso_stuck_seconds%(topic)s
                  and on (%(c)s, topic, partition) (kafka_partition_hw_minus_lso%(topic)s > 0 and kafka_partition_lso_stuck_seconds%(topic)s > 0)
                )
              |||), legend=q('{{topic}}/{{partition}} ({{%(c)s}})')),
            ],
          },
          {
            id: 17,
            type: 'timeseries',
            title: 'Top partitions by oldest withheld record',
            description: 'Age of the oldest record withheld from read_committed consumers (the record at the LSO), from its timestamp: how far behind real time a caught-up read_committed consumer of the partition is. Unlike the stuck LSO time it is not measured by the exporter, so it survives exporter restarts and needs no transaction forensics; it is usually a little larger, since the transaction wrote that record before the exporter saw the LSO stop. Timestamps are the producer\'s clock on CreateTime topics. Dashed lines: 1 minute, %s, %s.' % [text.seconds(c.stuckWarningSeconds), text.seconds(c.stuckCriticalSeconds)],
            datasource: g.datasource,
            gridPos: { x: 16, y: 29, w: 8, h: 8 },
            fieldConfig: {
              defaults: {
                unit: 's',
                color: { mode: 'palette-classic' },
                custom: {
                  drawStyle: 'line',
                  lineInterpolation: 'linear',
                  lineWidth: 1,
                  fillOpacity: 0,
                  gradientMode: 'none',
                  showPoints: 'never',
                  pointSize: 4,
                  spanNulls: false,
                  axisPlacement: 'auto',
                  axisLabel: '',
                  stacking: { mode: 'none', group: 'A' },
                  thresholdsStyle: { mode: 'dashed' },
                  lineStyle: { fill: 'solid' },
                },
                thresholds: {
                  mode: 'absolute',
                  steps: [
                    { color: 'green', value: null },
                    { color: 'yellow', value: 60 },
                    { color: 'orange', value: c.stuckWarningSeconds },
                    { color: 'red', value: c.stuckCriticalSeconds },
                  ],
                },
                mappings: [],
                min: 0,
              },
              overrides: [],
            },
            options: {
              legend: {
                showLegend: true,
                displayMode: 'table',
                placement: 'bottom',
                calcs: ['lastNotNull', 'max'],
              },
              tooltip: { mode: 'multi', sort: 'desc' },
            },
            targets: [
              g.target('A', q(|||
                topk(10,
                  kafka_partition_withheld_age_seconds%(topic)s > 0
                  and on (%(c)s, topic, partition) (kafka_partition_lso_stuck_seconds%(topic)s > 0)
                )
              |||), legend=q('{{topic}}/{{partition}} ({{%(c)s}})')),
            ],
          },
          {
            id: 10,
            type: 'table',
            title: 'Blocked read_committed groups',
            description: 'Groups blocked by an open transaction: on a partition whose LSO an open transaction pins below the high watermark, they have nothing left to read below the LSO (LSO lag 0) and have not committed past it (Beyond LSO 0). They are not slow: scaling or restarting consumers will not help. They move again when the transaction holding the LSO commits or is aborted. A read_uncommitted group committed between the LSO and the HW also has LSO lag 0, but it is reading, not waiting: it is not listed (see Groups reading past the LSO). Oldest unread record: how long ago the first record the group waits for was written (its HW time lag).',
            datasource: g.datasource,
            gridPos: { x: 0, y: 37, w: 24, h: 8 },
            fieldConfig: {
              defaults: {
                unit: 'short',
                decimals: 0,
                color: { mode: 'thresholds' },
                thresholds: {
                  mode: 'absolute',
                  steps: [
                    { color: 'green', value: null },
                  ],
                },
                mappings: [],
                custom: {
                  align: 'auto',
                  cellOptions: { type: 'auto' },
                  inspect: false,
                  filterable: true,
                },
                noValue: 'No group is blocked by an open transaction',
              },
              overrides: [
                {
                  matcher: { id: 'byName', options: 'group' },
                  properties: [
                    {
                      id: 'links',
                      value: [
                        {
                          title: 'Open this group\'s lag',
                          url: g.groupLinkURL,
                        },
                      ],
                    },
                  ],
                },
                {
                  matcher: { id: 'byName', options: 'Records behind (HW lag)' },
                  properties: [
                    {
                      id: 'thresholds',
                      value: {
                        mode: 'absolute',
                        steps: [
                          { color: 'green', value: null },
                          { color: 'orange', value: c.gapThreshold },
                        ],
                      },
                    },
                    {
                      id: 'custom.cellOptions',
                      value: { type: 'color-text' },
                    },
                  ],
                },
                {
                  matcher: { id: 'byName', options: 'LSO stuck for' },
                  properties: [
                    { id: 'unit', value: 's' },
                    { id: 'decimals', value: 0 },
                    {
                      id: 'thresholds',
                      value: {
                        mode: 'absolute',
                        steps: [
                          { color: 'green', value: null },
                          { color: 'yellow', value: 60 },
                          { color: 'orange', value: c.stuckWarningSeconds },
                          { color: 'red', value: c.stuckCriticalSeconds },
                        ],
                      },
                    },
                    {
                      id: 'custom.cellOptions',
                      value: { type: 'color-background', mode: 'basic' },
                    },
                  ],
                },
                {
                  matcher: { id: 'byName', options: 'Oldest unread record' },
                  properties: [
                    { id: 'unit', value: 's' },
                    { id: 'decimals', value: 0 },
                    {
                      id: 'thresholds',
                      value: {
                        mode: 'absolute',
                        steps: [
                          { color: 'green', value: null },
                          { color: 'yellow', value: 60 },
                          { color: 'orange', value: c.stuckWarningSeconds },
                          { color: 'red', value: c.stuckCriticalSeconds },
                        ],
                      },
                    },
                    {
                      id: 'custom.cellOptions',
                      value: { type: 'color-background', mode: 'basic' },
                    },
                  ],
                },
              ],
            },
            options: {
              showHeader: true,
              cellHeight: 'sm',
              footer: {
                show: false,
                reducer: ['sum'],
                countRows: false,
                fields: '',
              },
              sortBy: [
                { displayName: 'LSO stuck for', desc: true },
              ],
            },
            targets: [
              g.tableTarget('A', q(|||
                max by (%(c)s, group, topic, partition) (
                  (kafka_consumergroup_hw_lag%(groupTopic)s > 0)
                  and on (%(c)s, group, topic, partition) (kafka_consumergroup_lso_lag%(groupTopic)s == 0)
                  and on (%(c)s, group, topic, partition) (kafka_consumergroup_committed_beyond_lso%(groupTopic)s == 0)
                  and on (%(c)s, topic, partition) (kafka_partition_hw_minus_lso%(topic)s > 0 and kafka_partition_lso_stuck_seconds%(topic)s > 0)
                )
              |||)),
              g.tableTarget('B', q(|||
                max by (%(c)s, group, topic, partition) (
                  ((kafka_consumergroup_hw_lag%(groupTopic)s > 0)
                  and on (%(c)s, group, topic, partition) (kafka_consumergroup_lso_lag%(groupTopic)s == 0)
                  and on (%(c)s, group, topic, partition) (kafka_consumergroup_committed_beyond_lso%(groupTopic)s == 0)
                  and on (%(c)s, topic, partition) (kafka_partition_hw_minus_lso%(topic)s > 0 and kafka_partition_lso_stuck_seconds%(topic)s > 0)) * 0
                  + on (%(c)s, topic, partition) group_left
                  max by (%(c)s, topic, partition) (kafka_partition_lso_stuck_seconds%(topic)s)
                )
              |||)),
              g.tableTarget('C', q(|||
                max by (%(c)s, group, topic, partition) (
                  ((kafka_consumergroup_hw_lag%(groupTopic)s > 0)
                  and on (%(c)s, group, topic, partition) (kafka_consumergroup_lso_lag%(groupTopic)s == 0)
                  and on (%(c)s, group, topic, partition) (kafka_consumergroup_committed_beyond_lso%(groupTopic)s == 0)
                  and on (%(c)s, topic, partition) (kafka_partition_hw_minus_lso%(topic)s > 0 and kafka_partition_lso_stuck_seconds%(topic)s > 0)) * 0
                  + on (%(c)s, group) group_left
                  max by (%(c)s, group) (kafka_consumergroup_members%(group)s)
                )
              |||)),
              g.tableTarget('D', q(|||
                max by (%(c)s, group, topic, partition) (
                  kafka_consumergroup_hw_lag_seconds%(groupTopic)s
                  and on (%(c)s, group, topic, partition) (
                    (kafka_consumergroup_hw_lag%(groupTopic)s > 0)
                    and on (%(c)s, group, topic, partition) (kafka_consumergroup_lso_lag%(groupTopic)s == 0)
                    and on (%(c)s, group, topic, partition) (kafka_consumergroup_committed_beyond_lso%(groupTopic)s == 0)
                    and on (%(c)s, topic, partition) (kafka_partition_hw_minus_lso%(topic)s > 0 and kafka_partition_lso_stuck_seconds%(topic)s > 0)
                  )
                )
              |||)),
            ],
            transformations: [
              { id: 'merge', options: {} },
              {
                id: 'organize',
                options: {
                  excludeByName: { Time: true },
                  indexByName: {
                    [c.kafkaClusterLabel]: 0,
                    group: 1,
                    topic: 2,
                    partition: 3,
                    'Value #A': 4,
                    'Value #B': 5,
                    'Value #C': 6,
                    'Value #D': 7,
                  },
                  renameByName: {
                    'Value #A': 'Records behind (HW lag)',
                    'Value #B': 'LSO stuck for',
                    'Value #C': 'Members',
                    'Value #D': 'Oldest unread record',
                  },
                },
              },
            ],
          },
          {
            id: 11,
            type: 'row',
            title: 'Partition detail: $topic / $partition',
            collapsed: false,
            gridPos: { x: 0, y: 45, w: 24, h: 1 },
            panels: [],
          },
          {
            id: 12,
            type: 'timeseries',
            title: 'HW, LSO and committed offsets',
            description: 'High watermark and last stable offset of the chosen partition, with the committed offsets of the selected groups. A flat LSO under a rising HW is an open transaction. read_committed groups stop at the LSO; a group above the LSO reads uncommitted records. With granularity = "topic" (the exporter\'s default) a partition has these series only while an open transaction pins its LSO (behind the HW, not moved since the previous cycle): the Partition list offers those partitions.',
            datasource: g.datasource,
            gridPos: { x: 0, y: 46, w: 16, h: 9 },
            fieldConfig: {
              defaults: {
                unit: 'short',
                color: { mode: 'palette-classic' },
                custom: {
                  drawStyle: 'line',
                  lineInterpolation: 'linear',
                  lineWidth: 1,
                  fillOpacity: 0,
                  gradientMode: 'none',
                  showPoints: 'never',
                  pointSize: 4,
                  spanNulls: false,
                  axisPlacement: 'auto',
                  axisLabel: '',
                  stacking: { mode: 'none', group: 'A' },
                  thresholdsStyle: { mode: 'off' },
                  lineStyle: { fill: 'solid' },
                },
                thresholds: {
                  mode: 'absolute',
                  steps: [
                    { color: 'green', value: null },
                  ],
                },
                mappings: [],
                decimals: 0,
              },
              overrides: [
                {
                  matcher: { id: 'byRegexp', options: 'HW .*' },
                  properties: [
                    {
                      id: 'color',
                      value: { mode: 'fixed', fixedColor: 'blue' },
                    },
                    { id: 'custom.lineWidth', value: 2 },
                  ],
                },
                {
                  matcher: { id: 'byRegexp', options: 'LSO .*' },
                  properties: [
                    {
                      id: 'color',
                      value: { mode: 'fixed', fixedColor: 'orange' },
                    },
                    { id: 'custom.lineWidth', value: 2 },
                  ],
                },
                {
                  matcher: { id: 'byRegexp', options: 'committed: .*' },
                  properties: [
                    {
                      id: 'custom.lineStyle',
                      value: {
                        fill: 'dash',
                        dash: [10, 10],
                      },
                    },
                  ],
                },
              ],
            },
            options: {
              legend: {
                showLegend: true,
                displayMode: 'table',
                placement: 'bottom',
                calcs: ['lastNotNull'],
              },
              tooltip: { mode: 'multi', sort: 'desc' },
            },
            targets: [
              g.target('A', q('kafka_partition_high_watermark%(partition)s'), legend=q('HW {{topic}}/{{partition}} ({{%(c)s}})')),
              g.target('B', q('kafka_partition_last_stable_offset%(partition)s'), legend=q('LSO {{topic}}/{{partition}} ({{%(c)s}})')),
              g.target('C', q('kafka_consumergroup_committed_offset%(groupPartition)s'), legend=q('committed: {{group}} {{topic}}/{{partition}} ({{%(c)s}})')),
            ],
          },
          {
            id: 13,
            type: 'timeseries',
            title: 'Withheld records, stuck time and withheld age',
            description: 'HW - LSO of the chosen partition (left axis); how long its LSO has not moved and the age of the record at the LSO, the oldest withheld record (right axis). With granularity = "topic" (the exporter\'s default) the series exist only while an open transaction pins the partition\'s LSO.',
            datasource: g.datasource,
            gridPos: { x: 16, y: 46, w: 8, h: 9 },
            fieldConfig: {
              defaults: {
                unit: 'short',
                color: { mode: 'palette-classic' },
                custom: {
                  drawStyle: 'line',
                  lineInterpolation: 'linear',
                  lineWidth: 1,
                  fillOpacity: 0,
                  gradientMode: 'none',
                  showPoints: 'never',
                  pointSize: 4,
                  spanNulls: false,
                  axisPlacement: 'auto',
                  axisLabel: '',
                  stacking: { mode: 'none', group: 'A' },
                  thresholdsStyle: { mode: 'off' },
                  lineStyle: { fill: 'solid' },
                },
                thresholds: {
                  mode: 'absolute',
                  steps: [
                    { color: 'green', value: null },
                  ],
                },
                mappings: [],
                min: 0,
                decimals: 0,
              },
              overrides: [
                {
                  matcher: { id: 'byRegexp', options: '(stuck|withheld age) .*' },
                  properties: [
                    { id: 'unit', value: 's' },
                    { id: 'custom.axisPlacement', value: 'right' },
                    {
                      id: 'custom.lineStyle',
                      value: {
                        fill: 'dash',
                        dash: [10, 10],
                      },
                    },
                  ],
                },
              ],
            },
            options: {
              legend: {
                showLegend: true,
                displayMode: 'table',
                placement: 'bottom',
                calcs: ['lastNotNull'],
              },
              tooltip: { mode: 'multi', sort: 'desc' },
            },
            targets: [
              g.target('A', q('kafka_partition_hw_minus_lso%(partition)s'), legend=q('withheld {{topic}}/{{partition}} ({{%(c)s}})')),
              g.target('B', q('kafka_partition_lso_stuck_seconds%(partition)s'), legend=q('stuck {{topic}}/{{partition}} ({{%(c)s}})')),
              g.target('C', q('kafka_partition_withheld_age_seconds%(partition)s'), legend=q('withheld age {{topic}}/{{partition}} ({{%(c)s}})')),
            ],
          },
          g.row(18, 'Every transaction', 55),
          g.timeseries(
            19,
            'Open transactions by state',
            'Transactions the coordinators list as open for longer than the exporter\'s transaction_list_min_age (default 10 s), by coordinator state (kafka_cluster_open_transactions), whether or not they pin a partition the exporter samples. Ongoing: the producer is writing; PrepareCommit and PrepareAbort: the coordinator has decided and writes the markers (long only when a partition is unavailable); PrepareEpochFence: a new producer instance is fencing the old one.',
            { x: 0, y: 56, w: 8, h: 8 },
            [
              g.target('A', q('sum by (%(c)s, state) (kafka_cluster_open_transactions%(kafkaCluster)s)'), legend=q('{{state}} ({{%(c)s}})')),
            ],
            stacking='normal',
          ),
          g.timeseries(
            20,
            'Unpinning and prepared transactions',
            'Unpinning: open transactions that pin no partition the exporter samples (they write only to topics outside its filter, wait behind an older transaction, or have written nowhere yet): no per-partition panel or alert shows them (kafka_cluster_unpinning_open_transactions; KafkaTransactionLongOpenUnseen). Prepared: two-phase (KIP-939) transactions, which their coordinator never times out: only their application or an operator ends them (kafka_cluster_prepared_transactions; KafkaTransactionLongOpenUnseen names those that stay open and pin no sampled partition). Prepared reads 0 also where the brokers lack KIP-939.',
            { x: 8, y: 56, w: 8, h: 8 },
            [
              g.target('A', q('sum by (%(c)s) (kafka_cluster_unpinning_open_transactions%(kafkaCluster)s)'), legend=q('unpinning ({{%(c)s}})')),
              g.target('B', q(|||
                sum by (%(c)s) (kafka_cluster_prepared_transactions%(kafkaCluster)s)
                or on (%(c)s)
                0 * max by (%(c)s) (kafka_lso_exporter_up%(kafkaCluster)s)
              |||), legend=q('prepared ({{%(c)s}})')),
            ],
          ),
          g.timeseries(
            21,
            'Fencings and coordinator moves',
            'Per transactional id, per second: fencings (a producer instance fenced by a newer one with the same transactional id, or by its coordinator: kafka_transaction_fencings_total; KafkaTransactionFenced) and coordinator moves (the transactional id\'s coordinator changed broker: kafka_transaction_coordinator_moves_total). One fencing per deployment of an exactly-once application is expected; a steady rate is two instances sharing an id, or a crash loop. A cluster without any shows one line at 0.',
            { x: 16, y: 56, w: 8, h: 8 },
            [
              g.target('A', q(|||
                sum by (%(c)s, transactional_id) (rate(kafka_transaction_fencings_total%(kafkaCluster)s[$__rate_interval])) > 0
                or on (%(c)s)
                label_replace(0 * max by (%(c)s) (kafka_lso_exporter_up%(kafkaCluster)s), "transactional_id", "(none)", "", "")
              |||), legend=q('fenced {{transactional_id}} ({{%(c)s}})')),
              g.target('B', q(|||
                sum by (%(c)s, transactional_id) (rate(kafka_transaction_coordinator_moves_total%(kafkaCluster)s[$__rate_interval])) > 0
                or on (%(c)s)
                label_replace(0 * max by (%(c)s) (kafka_lso_exporter_up%(kafkaCluster)s), "transactional_id", "(none)", "", "")
              |||), legend=q('coordinator moved {{transactional_id}} ({{%(c)s}})')),
            ],
            unit='ops',
            decimals=null,
            overrides=[
              {
                matcher: { id: 'byRegexp', options: 'coordinator moved .*' },
                properties: [
                  {
                    id: 'custom.lineStyle',
                    value: {
                      fill: 'dash',
                      dash: [10, 10],
                    },
                  },
                ],
              },
            ],
          ),
          g.table(
            22,
            'Oldest open transactions',
            'The oldest open transactions of the cluster, as their coordinators list them (transaction_list_detail, default 10): age, time left before the coordinator times them out (empty for two-phase transactions, which it never times out; negative: overdue), the partitions they hold, and how many of those the exporter shows as pinned (empty: they pin no sampled partition). /api/v1/stuck and the exporter\'s / page list the same with their partitions, fencings and coordinator moves.',
            { x: 0, y: 64, w: 24, h: 8 },
            [
              g.tableTarget('A', q('max by (%(c)s, transactional_id, producer_id, producer_epoch, state, coordinator) (kafka_coordinator_transaction_age_seconds%(kafkaCluster)s)')),
              g.tableTarget('B', q('max by (%(c)s, transactional_id, producer_id, producer_epoch, state, coordinator) (kafka_coordinator_transaction_timeout_left_seconds%(kafkaCluster)s)')),
              g.tableTarget('C', q('max by (%(c)s, transactional_id, producer_id, producer_epoch, state, coordinator) (kafka_coordinator_transaction_partitions%(kafkaCluster)s)')),
              g.tableTarget('D', q(|||
                max by (%(c)s, transactional_id, producer_id, producer_epoch, state, coordinator) (
                  kafka_coordinator_transaction_age_seconds%(kafkaCluster)s * 0
                  + on (%(c)s, producer_id) group_left ()
                  count by (%(c)s, producer_id) (kafka_transaction_open_info%(kafkaCluster)s)
                )
              |||)),
            ],
            [
              { id: 'merge', options: {} },
              {
                id: 'organize',
                options: {
                  excludeByName: { Time: true },
                  indexByName: {
                    [c.kafkaClusterLabel]: 0,
                    transactional_id: 1,
                    producer_id: 2,
                    producer_epoch: 3,
                    state: 4,
                    coordinator: 5,
                    'Value #A': 6,
                    'Value #B': 7,
                    'Value #C': 8,
                    'Value #D': 9,
                  },
                  renameByName: {
                    'Value #A': 'Age',
                    'Value #B': 'Time left',
                    'Value #C': 'Partitions',
                    'Value #D': 'Pinned partitions shown',
                  },
                },
              },
            ],
            overrides=[
              g.secondsColumn('Age', [
                { color: 'yellow', value: 60 },
                { color: 'orange', value: c.stuckWarningSeconds },
                { color: 'red', value: c.stuckCriticalSeconds },
              ]),
              g.secondsColumn('Time left', [
                { color: 'orange', value: 0 },
                { color: 'green', value: 30 },
              ], lowIsBad=true),
            ],
            noValue='No open transaction listed (transaction_list off, or none open)',
            sortBy=[{ displayName: 'Age', desc: true }],
          ),
          g.row(23, 'Cost of exactly-once', 72),
          g.timeseries(
            24,
            'Transaction markers per second',
            'Commit and abort markers (control records) written per second, per topic and type, from the record-batch headers the exporter reads (kafka_topic_transaction_markers_total). Each transaction writes one marker to every partition it wrote to: many short transactions over many partitions make many markers. Aborts mean failed or fenced transactions.',
            { x: 0, y: 73, w: 8, h: 8 },
            [
              g.target('A', q('sum by (%(c)s, topic, marker) (rate(kafka_topic_transaction_markers_total%(topic)s[$__rate_interval]))'), legend=q('{{marker}} {{topic}} ({{%(c)s}})')),
            ],
            unit='ops',
            decimals=null,
            overrides=[
              {
                matcher: { id: 'byRegexp', options: 'abort .*' },
                properties: [
                  {
                    id: 'color',
                    value: { mode: 'fixed', fixedColor: 'red' },
                  },
                ],
              },
            ],
          ),
          g.timeseries(
            25,
            'Aborted records per second',
            'Records of aborted transactions per second, per topic (kafka_topic_aborted_records_total): written, replicated and stored, never delivered to read_committed consumers, and counted as lag by tools that read offsets only. A topic without any shows 0.',
            { x: 8, y: 73, w: 8, h: 8 },
            [
              g.target('A', q(|||
                sum by (%(c)s, topic) (rate(kafka_topic_aborted_records_total%(topic)s[$__rate_interval]))
                or on (%(c)s, topic)
                0 * max by (%(c)s, topic) (kafka_topic_partitions%(topic)s)
              |||), legend=q('{{topic}} ({{%(c)s}})')),
            ],
            unit='ops',
            decimals=null,
          ),
          g.timeseries(
            26,
            'Control share of the log',
            'Markers per offset read: rate(kafka_topic_transaction_markers_total) / rate(kafka_topic_scanned_offsets_total), per topic: the share of the topic\'s offsets that are commit or abort markers rather than records. 50% is one marker per record, a transaction per record; a few percent is the price of batching many records per transaction. Offsets and lag counted in offsets overstate records by this share.',
            { x: 16, y: 73, w: 8, h: 8 },
            [
              g.target('A', q(|||
                sum by (%(c)s, topic) (rate(kafka_topic_transaction_markers_total%(topic)s[$__rate_interval]))
                / sum by (%(c)s, topic) (rate(kafka_topic_scanned_offsets_total%(topic)s[$__rate_interval]))
              |||), legend=q('{{topic}} ({{%(c)s}})')),
            ],
            unit='percentunit',
            decimals=null,
            thresholds=[{ color: 'orange', value: 0.1 }],
          ),
        ],
      ),
  },
}
