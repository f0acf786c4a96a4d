local grafana = import '../lib/grafana.libsonnet';
local promql = import '../lib/promql.libsonnet';
local text = import '../lib/text.libsonnet';

{
  grafanaDashboards+:: {
    local c = $._config,
    local g = grafana.new(c),
    local q = promql.new(c).fmt,
    // q, with the isolation selectors: %(isolation)s the groups' isolation series,
    // %(uncommitted)s those of groups judged read_uncommitted or mixed; and %(abortedWindow)s
    // the window of KafkaConsumerGroupReadAbortedRecords.
    local groupMatchers = [c.kafkaClusterLabel + '=~"$kafka_cluster"', 'group=~"$group"'],
    local qi(text) = std.rstripChars(text, '\n') % (promql.new(c).vars + {
      isolation: promql.new(c).selector(groupMatchers),
      uncommitted: promql.new(c).selector(groupMatchers + ['isolation_level=~"read_uncommitted|mixed"']),
      abortedWindow: c.abortedRecordsReadWindow,
    }),

    'kafka-lso-consumer-groups.json':
      g.dashboard(
        uid=c.dashboardUIDs.consumerGroups,
        title='Kafka consumer groups: HW vs LSO lag',
        description='Consumer group lag against the high watermark and against the last stable offset: which groups are slow, which are blocked by open transactions, which read uncommitted data.',
        variables=[g.variables.datasource, g.variables.kafkaCluster, g.variables.topic, g.variables.group],
        panels=[
          {
            id: 1,
            type: 'stat',
            title: 'Groups blocked',
            description: 'Groups blocked by an open transaction: nothing left to read below the LSO (LSO lag 0), not committed past it, on a partition whose LSO an open transaction pins below the high watermark. A read_uncommitted group between the LSO and the HW is not counted. See the table below.',
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
            id: 2,
            type: 'stat',
            title: 'Groups reading uncommitted',
            description: 'Groups with committed offsets past the LSO of a selected topic, or that the exporter judges read_uncommitted or mixed (kafka_consumergroup_isolation_level) and that have offsets on a selected topic: they use read_uncommitted and may process records that are later aborted. The row Isolation below names them.',
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
              g.target('A', qi(|||
                count(
                  count by (%(c)s, group) (kafka_consumergroup_topic_committed_beyond_lso%(groupTopic)s > 0)
                  or
                  count by (%(c)s, group) (
                    kafka_consumergroup_topic_hw_lag%(groupTopic)s
                    and on (%(c)s, group) (kafka_consumergroup_isolation_level%(uncommitted)s == 1)
                  )
                )
                or
                0 * count(kafka_lso_exporter_up%(kafkaCluster)s == 1)
              |||), legend='__auto'),
            ],
          },
          {
            id: 3,
            type: 'stat',
            title: 'HW lag',
            description: 'Total lag against the high watermark, as other lag exporters report it. It counts records that read_committed consumers cannot read yet.',
            datasource: g.datasource,
            gridPos: { x: 8, y: 0, w: 4, h: 4 },
            fieldConfig: {
              defaults: {
                unit: 'short',
                color: { mode: 'thresholds' },
                thresholds: {
                  mode: 'absolute',
                  steps: [
                    { color: 'green', value: null },
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
              colorMode: 'none',
              graphMode: 'area',
              justifyMode: 'auto',
              orientation: 'auto',
              textMode: 'auto',
              wideLayout: true,
              showPercentChange: false,
            },
            targets: [
              g.target('A', q('sum(kafka_consumergroup_topic_hw_lag%(groupTopic)s)'), legend='__auto'),
            ],
          },
          {
            id: 4,
            type: 'stat',
            title: 'LSO lag',
            description: 'Total lag against the last stable offset: what read_committed consumers can actually read right now. This is the lag that more consumers can work off.',
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
              colorMode: 'none',
              graphMode: 'area',
              justifyMode: 'auto',
              orientation: 'auto',
              textMode: 'auto',
              wideLayout: true,
              showPercentChange: false,
            },
            targets: [
              g.target('A', q('sum(kafka_consumergroup_topic_lso_lag%(groupTopic)s)'), legend='__auto'),
            ],
          },
          {
            id: 5,
            type: 'stat',
            title: 'Lag held by open transactions',
            description: 'HW lag minus LSO lag: the part of the lag no consumer can work off until open transactions commit or abort. Topics a group has committed past the LSO of (it reads uncommitted records) are left out.',
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
              g.target('A', q(|||
                sum(
                  (kafka_consumergroup_topic_hw_lag%(groupTopic)s - kafka_consumergroup_topic_lso_lag%(groupTopic)s)
                  unless on (%(c)s, group, topic) (kafka_consumergroup_topic_committed_beyond_lso%(groupTopic)s > 0)
                )
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
            title: 'Blocked read_committed groups',
            description: 'Groups blocked by an open transaction: on a partition whose LSO an open transaction pins below the high watermark, they have nothing left to read below the LSO (LSO lag 0) and have not committed past it (Beyond LSO 0). They are not slow: scaling or restarting consumers will not help. They move again when the transaction holding the LSO commits or is aborted. A read_uncommitted group committed between the LSO and the HW also has LSO lag 0, but it is reading, not waiting: it is not listed (see Groups reading past the LSO). Oldest unread record: how long ago the first record the group waits for was written (its HW time lag).',
            datasource: g.datasource,
            gridPos: { x: 0, y: 4, w: 24, h: 8 },
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
            id: 19,
            type: 'table',
            title: 'Blocked groups and the transaction blocking them',
            description: 'Groups blocked on a partition whose LSO an open transaction pins below the high watermark: nothing left to read below the LSO (LSO lag 0) and not committed past it, with the open transaction whose first offset is the partition\'s LSO: the one they wait for. Records behind is the group\'s HW lag. Resolve the transaction, not the group; the exporter\'s /api/v1/stuck has its abort command (kafka-transactions.sh ... abort --topic TOPIC --partition PARTITION --start-offset START_OFFSET). A group is missing here, but listed in Blocked read_committed groups, while the exporter has no transaction forensics for its partition.',
            datasource: g.datasource,
            gridPos: { x: 0, y: 12, w: 24, h: 8 },
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
                noValue: 'No group waits for an open transaction',
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
                  matcher: { id: 'byName', options: 'Transaction open for' },
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
                  matcher: { id: 'byName', options: 'Transactional id' },
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
                { displayName: 'Transaction open for', desc: true },
              ],
            },
            targets: [
              g.tableTarget('A', q(|||
                max by (%(c)s, group, topic, partition, transactional_id, producer_id, start_offset) (
                  (
                    (kafka_consumergroup_hw_lag%(groupTopic)s > 0)
                    and on (%(c)s, group, topic, partition) (kafka_consumergroup_lso_lag%(groupTopic)s == 0)
                    and on (%(c)s, group, topic, partition) (kafka_consumergroup_committed_beyond_lso%(groupTopic)s == 0)
                    and on (%(c)s, topic, partition) (kafka_partition_hw_minus_lso%(topic)s > 0 and kafka_partition_lso_stuck_seconds%(topic)s > 0)
                  )
                  * on (%(c)s, topic, partition) group_left (transactional_id, producer_id, start_offset)
                  topk by (%(c)s, topic, partition) (1,
                    kafka_transaction_open_info%(topic)s
                    and on (%(c)s, topic, partition, start_offset)
                    count_values by (%(c)s, topic, partition) ("start_offset", kafka_partition_last_stable_offset%(topic)s)
                  )
                )
              |||)),
              g.tableTarget('B', q(|||
                max by (%(c)s, group, topic, partition, transactional_id, producer_id, start_offset) (
                  (
                    (kafka_consumergroup_hw_lag%(groupTopic)s > 0)
                    and on (%(c)s, group, topic, partition) (kafka_consumergroup_lso_lag%(groupTopic)s == 0)
                    and on (%(c)s, group, topic, partition) (kafka_consumergroup_committed_beyond_lso%(groupTopic)s == 0)
                    and on (%(c)s, topic, partition) (kafka_partition_hw_minus_lso%(topic)s > 0 and kafka_partition_lso_stuck_seconds%(topic)s > 0)
                  ) * 0
                  + on (%(c)s, topic, partition) group_left (transactional_id, producer_id, start_offset)
                  topk by (%(c)s, topic, partition) (1,
                    kafka_transaction_open_age_seconds%(topic)s
                    and on (%(c)s, topic, partition, start_offset)
                    count_values by (%(c)s, topic, partition) ("start_offset", kafka_partition_last_stable_offset%(topic)s)
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
                    transactional_id: 5,
                    producer_id: 6,
                    start_offset: 7,
                    'Value #B': 8,
                  },
                  renameByName: {
                    'Value #A': 'Records behind (HW lag)',
                    transactional_id: 'Transactional id',
                    producer_id: 'Producer id',
                    start_offset: 'Start offset (the LSO)',
                    'Value #B': 'Transaction open for',
                  },
                },
              },
            ],
          },
          {
            id: 8,
            type: 'row',
            title: 'Lag over time',
            collapsed: false,
            gridPos: { x: 0, y: 20, w: 24, h: 1 },
            panels: [],
          },
          {
            id: 9,
            type: 'timeseries',
            title: 'HW lag per group and topic',
            description: 'Records between each group\'s committed offset and the high watermark, summed over partitions. Includes records held back by open transactions.',
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
              g.target('A', q('sum by (%(c)s, group, topic) (kafka_consumergroup_topic_hw_lag%(groupTopic)s)'), legend=q('{{group}} {{topic}} ({{%(c)s}})')),
            ],
          },
          {
            id: 10,
            type: 'timeseries',
            title: 'LSO lag per group and topic',
            description: 'Records between each group\'s committed offset and the last stable offset: what a read_committed consumer can read now. At 0 the group is caught up, whatever the HW lag says.',
            datasource: g.datasource,
            gridPos: { x: 12, y: 21, w: 12, h: 8 },
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
              g.target('A', q('sum by (%(c)s, group, topic) (kafka_consumergroup_topic_lso_lag%(groupTopic)s)'), legend=q('{{group}} {{topic}} ({{%(c)s}})')),
            ],
          },
          {
            id: 11,
            type: 'timeseries',
            title: 'Withheld from each group (HW lag - LSO lag)',
            description: 'The part of each group\'s lag that open transactions hold back. For a read_committed group it is lag it cannot work off, however fast it consumes; it disappears when the transactions end. A topic the group has committed past the LSO of (it reads uncommitted records) has no line.',
            datasource: g.datasource,
            gridPos: { x: 0, y: 29, w: 12, h: 8 },
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
                sum by (%(c)s, group, topic) (
                  (kafka_consumergroup_topic_hw_lag%(groupTopic)s - kafka_consumergroup_topic_lso_lag%(groupTopic)s)
                  unless on (%(c)s, group, topic) (kafka_consumergroup_topic_committed_beyond_lso%(groupTopic)s > 0)
                )
              |||), legend=q('{{group}} {{topic}} ({{%(c)s}})')),
            ],
          },
          {
            id: 12,
            type: 'timeseries',
            title: 'Groups beyond the LSO',
            description: 'Records each group has committed past the last stable offset. Only a read_uncommitted consumer gets there: it processed records whose transaction may still abort, and it disagrees with read_committed groups on the same topic.',
            datasource: g.datasource,
            gridPos: { x: 12, y: 29, w: 12, h: 8 },
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
              g.target('A', q('sum by (%(c)s, group, topic) (kafka_consumergroup_topic_committed_beyond_lso%(groupTopic)s) > 0'), legend=q('{{group}} {{topic}} ({{%(c)s}})')),
            ],
          },
          {
            id: 20,
            type: 'row',
            title: 'Time lag',
            collapsed: false,
            gridPos: { x: 0, y: 37, w: 24, h: 1 },
            panels: [],
          },
          {
            id: 21,
            type: 'timeseries',
            title: 'HW time lag per group',
            description: 'Per group, the largest over its partitions of the seconds since the first record it has not read was written (up to the high watermark); 0 when it has read everything. Includes the wait for open transactions: a blocked read_committed group\'s HW time lag is the age of the record at the LSO. Record timestamps are the producer\'s clock on CreateTime topics.',
            datasource: g.datasource,
            gridPos: { x: 0, y: 38, w: 12, h: 8 },
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
              g.target('A', q('max by (%(c)s, group) (kafka_consumergroup_topic_max_hw_lag_seconds%(groupTopic)s)'), legend=q('{{group}} ({{%(c)s}})')),
            ],
          },
          {
            id: 22,
            type: 'timeseries',
            title: 'LSO time lag per group',
            description: 'Per group, the largest over its partitions of the seconds since the first record a read_committed consumer could read now (up to the LSO) and the group has not read was written; 0 when nothing is left below the LSO. A blocked group has LSO time lag 0 and HW time lag > 0: it is waiting, not slow.',
            datasource: g.datasource,
            gridPos: { x: 12, y: 38, w: 12, h: 8 },
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
              g.target('A', q('max by (%(c)s, group) (kafka_consumergroup_topic_max_lso_lag_seconds%(groupTopic)s)'), legend=q('{{group}} ({{%(c)s}})')),
            ],
          },
          {
            id: 23,
            type: 'table',
            title: 'Time lag per group and topic',
            description: 'Per group and topic, the largest time lag over its partitions: how long ago the oldest record the group has not read was written, up to the high watermark (HW time lag) and up to the LSO (LSO time lag). HW time lag well above LSO time lag: the group waits for an open transaction.',
            datasource: g.datasource,
            gridPos: { x: 0, y: 46, w: 24, h: 8 },
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
                  matcher: { id: 'byName', options: 'HW time lag' },
                  properties: [
                    { id: 'unit', value: 's' },
                    { id: 'decimals', value: 0 },
                  ],
                },
                {
                  matcher: { id: 'byName', options: 'LSO time lag' },
                  properties: [
                    { id: 'unit', value: 's' },
                    { id: 'decimals', value: 0 },
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
                { displayName: 'HW time lag', desc: true },
              ],
            },
            targets: [
              g.tableTarget('A', q('max by (%(c)s, group, topic) (kafka_consumergroup_topic_max_hw_lag_seconds%(groupTopic)s)')),
              g.tableTarget('B', q('max by (%(c)s, group, topic) (kafka_consumergroup_topic_max_lso_lag_seconds%(groupTopic)s)')),
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
                    'Value #A': 3,
                    'Value #B': 4,
                  },
                  renameByName: { 'Value #A': 'HW time lag', 'Value #B': 'LSO time lag' },
                },
              },
            ],
          },
          {
            id: 13,
            type: 'row',
            title: 'Groups',
            collapsed: false,
            gridPos: { x: 0, y: 54, w: 24, h: 1 },
            panels: [],
          },
          {
            id: 14,
            type: 'table',
            title: 'Groups reading past the LSO',
            description: 'Groups whose committed offsets on a topic are past the last stable offsets, by how many records (summed over the topic\'s partitions). Expected for read_uncommitted consumers; a surprise for anyone who relies on exactly-once. Per topic, because a read_uncommitted group on a topic whose LSO keeps moving is past it without any partition being pinned.',
            datasource: g.datasource,
            gridPos: { x: 0, y: 55, w: 12, h: 8 },
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
                noValue: 'No group reads past the LSO',
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
                  matcher: { id: 'byName', options: 'Beyond LSO' },
                  properties: [
                    {
                      id: 'thresholds',
                      value: {
                        mode: 'absolute',
                        steps: [
                          { color: 'green', value: null },
                          { color: 'orange', value: 1 },
                        ],
                      },
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
                { displayName: 'Beyond LSO', desc: true },
              ],
            },
            targets: [
              g.tableTarget('A', q(|||
                max by (%(c)s, group, topic) (
                  kafka_consumergroup_topic_committed_beyond_lso%(groupTopic)s > 0
                )
              |||)),
            ],
            transformations: [
              {
                id: 'organize',
                options: {
                  excludeByName: { Time: true },
                  indexByName: {
                    [c.kafkaClusterLabel]: 0,
                    group: 1,
                    topic: 2,
                    Value: 3,
                  },
                  renameByName: { Value: 'Beyond LSO' },
                },
              },
            ],
          },
          {
            id: 15,
            type: 'table',
            title: 'State and members',
            description: 'Current state and member count of each group. Empty means nobody consumes; a group stuck in a rebalance state does not consume either.',
            datasource: g.datasource,
            gridPos: { x: 12, y: 55, w: 12, h: 8 },
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
                  matcher: { id: 'byName', options: 'State' },
                  properties: [
                    {
                      id: 'mappings',
                      value: [
                        {
                          type: 'value',
                          options: {
                            Stable: { color: 'green', index: 0 },
                            Empty: { color: 'text', index: 1 },
                            PreparingRebalance: { color: 'orange', index: 2 },
                            CompletingRebalance: { color: 'orange', index: 3 },
                            Dead: { color: 'red', index: 4 },
                            Unknown: { color: 'red', index: 5 },
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
            },
            targets: [
              g.tableTarget('A', q(|||
                max by (%(c)s, group) (kafka_consumergroup_members%(group)s)
                * on (%(c)s, group) group_left (state)
                topk by (%(c)s, group) (1, kafka_consumergroup_state%(group)s == 1)
              |||)),
            ],
            transformations: [
              {
                id: 'organize',
                options: {
                  excludeByName: { Time: true },
                  indexByName: {
                    [c.kafkaClusterLabel]: 0,
                    group: 1,
                    state: 2,
                    Value: 3,
                  },
                  renameByName: { state: 'State', Value: 'Members' },
                },
              },
            ],
          },
          {
            id: 16,
            type: 'timeseries',
            title: 'Members per group',
            description: 'Consumers in each group over time. A drop to 0 or frequent changes (rebalances) explain lag that open transactions do not.',
            datasource: g.datasource,
            gridPos: { x: 0, y: 63, w: 24, h: 7 },
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
              overrides: [],
            },
            options: {
              legend: {
                showLegend: true,
                displayMode: 'table',
                placement: 'bottom',
                calcs: ['lastNotNull', 'min', 'max'],
              },
              tooltip: { mode: 'multi', sort: 'desc' },
            },
            targets: [
              g.target('A', q('max by (%(c)s, group) (kafka_consumergroup_members%(group)s)'), legend=q('{{group}} ({{%(c)s}})')),
            ],
          },
          {
            id: 17,
            type: 'row',
            title: 'Per partition',
            collapsed: false,
            gridPos: { x: 0, y: 70, w: 24, h: 1 },
            panels: [],
          },
          {
            id: 18,
            type: 'table',
            title: 'Lag per group and partition',
            description: 'Both lags of every group partition. Withheld = HW lag - LSO lag, held back by open transactions; Beyond LSO > 0 means the group reads uncommitted records. LSO stuck for is how long the partition\'s LSO has not moved. HW time lag and LSO time lag: seconds since the first record the group has not read (up to the HW, up to the LSO) was written. With granularity = "topic" (the exporter\'s default) only the partitions whose LSO an open transaction pins have per-partition series: the table lists the groups on those partitions, and the panels above show every partition through the per-topic series.',
            datasource: g.datasource,
            gridPos: { x: 0, y: 71, w: 24, h: 10 },
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
                  matcher: { id: 'byName', options: 'Withheld' },
                  properties: [
                    {
                      id: 'thresholds',
                      value: {
                        mode: 'absolute',
                        steps: [
                          { color: 'green', value: null },
                          { color: 'orange', value: 1 },
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
                  matcher: { id: 'byName', options: 'Beyond LSO' },
                  properties: [
                    {
                      id: 'thresholds',
                      value: {
                        mode: 'absolute',
                        steps: [
                          { color: 'green', value: null },
                          { color: 'orange', value: 1 },
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
                  matcher: { id: 'byName', options: 'HW time lag' },
                  properties: [
                    { id: 'unit', value: 's' },
                    { id: 'decimals', value: 0 },
                  ],
                },
                {
                  matcher: { id: 'byName', options: 'LSO time lag' },
                  properties: [
                    { id: 'unit', value: 's' },
                    { id: 'decimals', value: 0 },
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
                { displayName: 'Withheld', desc: true },
              ],
            },
            targets: [
              g.tableTarget('A', q('max by (%(c)s, group, topic, partition) (kafka_consumergroup_committed_offset%(groupTopic)s)')),
              g.tableTarget('B', q('max by (%(c)s, group, topic, partition) (kafka_consumergroup_hw_lag%(groupTopic)s)')),
              g.tableTarget('C', q('max by (%(c)s, group, topic, partition) (kafka_consumergroup_lso_lag%(groupTopic)s)')),
              g.tableTarget('D', q(|||
                max by (%(c)s, group, topic, partition) (
                  (kafka_consumergroup_hw_lag%(groupTopic)s
                  - kafka_consumergroup_lso_lag%(groupTopic)s)
                  unless on (%(c)s, group, topic, partition) (kafka_consumergroup_committed_beyond_lso%(groupTopic)s > 0)
                )
              |||)),
              g.tableTarget('E', q('max by (%(c)s, group, topic, partition) (kafka_consumergroup_committed_beyond_lso%(groupTopic)s)')),
              g.tableTarget('F', q(|||
                max by (%(c)s, group, topic, partition) (
                  kafka_consumergroup_committed_offset%(groupTopic)s * 0
                  + on (%(c)s, topic, partition) group_left
                  max by (%(c)s, topic, partition) (kafka_partition_lso_stuck_seconds%(topic)s)
                )
              |||)),
              g.tableTarget('G', q('max by (%(c)s, group, topic, partition) (kafka_consumergroup_hw_lag_seconds%(groupTopic)s)')),
              g.tableTarget('H', q('max by (%(c)s, group, topic, partition) (kafka_consumergroup_lso_lag_seconds%(groupTopic)s)')),
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
                    'Value #E': 8,
                    'Value #F': 9,
                    'Value #G': 10,
                    'Value #H': 11,
                  },
                  renameByName: {
                    'Value #A': 'Committed offset',
                    'Value #B': 'HW lag',
                    'Value #C': 'LSO lag',
                    'Value #D': 'Withheld',
                    'Value #E': 'Beyond LSO',
                    'Value #F': 'LSO stuck for',
                    'Value #G': 'HW time lag',
                    'Value #H': 'LSO time lag',
                  },
                },
              },
            ],
          },
          {
            id: 24,
            type: 'row',
            title: 'Share groups (KIP-932)',
            collapsed: false,
            gridPos: { x: 0, y: 81, w: 24, h: 1 },
            panels: [],
          },
          {
            id: 25,
            type: 'timeseries',
            title: 'Share group lag, as the broker computes it',
            description: 'Records up to the high watermark that each share group has not acknowledged yet, summed over partitions (kafka_sharegroup_topic_broker_lag, KIP-1226, Kafka 4.2 and later). Includes records withheld by open transactions, which a read_committed share group cannot deliver yet.',
            datasource: g.datasource,
            gridPos: { x: 0, y: 82, w: 12, h: 8 },
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
              g.target('A', q('sum by (%(c)s, group, topic) (kafka_sharegroup_topic_broker_lag%(groupTopic)s)'), legend=q('{{group}} {{topic}} ({{%(c)s}})')),
            ],
          },
          {
            id: 26,
            type: 'timeseries',
            title: 'Share group lag against its bound',
            description: 'Records from each share group\'s start offset up to the bound its share.isolation.level allows (the LSO for read_committed, the HW otherwise), never counting commit/abort markers, summed over partitions (kafka_sharegroup_topic_lag). The start offset moves only past whole acknowledged batches, so this can exceed the broker\'s lag.',
            datasource: g.datasource,
            gridPos: { x: 12, y: 82, w: 12, h: 8 },
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
              g.target('A', q('sum by (%(c)s, group, topic) (kafka_sharegroup_topic_lag%(groupTopic)s)'), legend=q('{{group}} {{topic}} ({{%(c)s}})')),
            ],
          },
          g.row(27, 'Commit progress', 90),
          g.table(
            28,
            'Status per group',
            'Each group\'s status (kafka_consumergroup_status): ok (nothing to read, or reading and committing), lagging (behind, its committed offsets move), stalled (behind, no commit for the exporter\'s stall_after, default 5 min), stopped (stalled and its lag grows), rewinding (a committed offset went back), blocked (waiting for an open transaction), rebalancing (its members are being reassigned), abandoned (its members own none of its partitions and its offsets have not moved for the exporter\'s groups.abandon_after). Longest commit stall: how long ago the committed offset last moved on the group\'s worst topic while it had records to read; where the exporter first sees it, the clock is dated by the first record left to read. KafkaConsumerGroupCommitStalled fires after %s stalled or stopped.' % text.duration(c.commitStalledFor),
            { x: 0, y: 91, w: 12, h: 8 },
            [
              g.tableTarget('A', q('max by (%(c)s, group, status) (kafka_consumergroup_status%(group)s == 1)')),
              g.tableTarget('B', q('max by (%(c)s, group) (kafka_consumergroup_topic_max_commit_stall_seconds%(group)s)')),
            ],
            [
              { id: 'merge', options: {} },
              {
                id: 'organize',
                options: {
                  excludeByName: { Time: true, 'Value #A': true },
                  indexByName: {
                    [c.kafkaClusterLabel]: 0,
                    group: 1,
                    status: 2,
                    'Value #B': 3,
                  },
                  renameByName: { status: 'Status', 'Value #B': 'Longest commit stall' },
                },
              },
            ],
            overrides=[
              g.groupLinkColumn,
              {
                matcher: { id: 'byName', options: 'Status' },
                properties: [
                  {
                    id: 'mappings',
                    value: [
                      {
                        type: 'value',
                        options: {
                          ok: { color: 'green', index: 0 },
                          lagging: { color: 'yellow', index: 1 },
                          rewinding: { color: 'blue', index: 2 },
                          blocked: { color: 'orange', index: 3 },
                          stalled: { color: 'orange', index: 4 },
                          stopped: { color: 'red', index: 5 },
                          rebalancing: { color: 'purple', index: 6 },
                          abandoned: { color: 'text', index: 7 },
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
              g.secondsColumn('Longest commit stall', [
                { color: 'yellow', value: 60 },
                { color: 'orange', value: 300 },
                { color: 'red', value: 600 },
              ]),
            ],
            noValue='No group status from the exporter',
            sortBy=[{ displayName: 'Longest commit stall', desc: true }],
          ),
          g.timeseries(
            29,
            'Longest commit stall by group and topic',
            'Seconds since the committed offset last moved on the group\'s worst partition of each topic, while the group had records to read there (kafka_consumergroup_topic_max_commit_stall_seconds); pairs at 0 (nothing to read) are not drawn, and a cluster without any stall shows one line at 0. A sawtooth is a group committing every few seconds; a line that keeps rising is a stall. Where the exporter first sees a group-partition (a restart, a hand-over), the clock is dated by the first record left to read.',
            { x: 12, y: 91, w: 12, h: 8 },
            [
              g.target('A', q(|||
                max by (%(c)s, group, topic) (kafka_consumergroup_topic_max_commit_stall_seconds%(groupTopic)s) > 0
                or on (%(c)s)
                label_replace(0 * kafka_lso_exporter_up%(kafkaCluster)s, "group", "(no stall)", "", "")
              |||), legend=q('{{group}} {{topic}} ({{%(c)s}})')),
            ],
            unit='s',
            thresholds=[{ color: 'orange', value: 300 }],
          ),
          g.row(30, 'Retention risk', 99),
          g.table(
            31,
            'Time left before retention deletes unconsumed records',
            'Per group and topic, smallest first: a lower bound of the time before time-based retention may delete the oldest record the group has not consumed (kafka_consumergroup_topic_min_retention_margin_seconds: the topic\'s retention.ms less the age of that record; the whole retention when the group has nothing left to read), the topic\'s retention, and the share of it left. KafkaConsumerGroupRetentionRisk warns below %s%% of the retention and KafkaConsumerGroupRetentionRiskCritical pages below %s on a group that is stalled, stopped or blocked. Topics of unlimited retention are not listed.' % [text.number(c.retentionRiskFraction * 100), text.seconds(c.retentionRiskCriticalSeconds)],
            { x: 0, y: 100, w: 12, h: 8 },
            [
              g.tableTarget('A', q('min by (%(c)s, group, topic) (kafka_consumergroup_topic_min_retention_margin_seconds%(groupTopic)s)')),
              g.tableTarget('B', q(|||
                max by (%(c)s, group, topic) (
                  kafka_consumergroup_topic_min_retention_margin_seconds%(groupTopic)s * 0
                  + on (%(c)s, topic) group_left () kafka_topic_retention_seconds%(topic)s
                )
              |||)),
              g.tableTarget('C', q(|||
                min by (%(c)s, group, topic) (
                  kafka_consumergroup_topic_min_retention_margin_seconds%(groupTopic)s
                  / on (%(c)s, topic) group_left () kafka_topic_retention_seconds%(topic)s
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
                    group: 1,
                    topic: 2,
                    'Value #A': 3,
                    'Value #B': 4,
                    'Value #C': 5,
                  },
                  renameByName: {
                    'Value #A': 'Time left',
                    'Value #B': 'Retention',
                    'Value #C': 'Share of retention left',
                  },
                },
              },
            ],
            overrides=[
              g.groupLinkColumn,
              g.secondsColumn('Time left', [
                { color: 'orange', value: c.retentionRiskCriticalSeconds },
                { color: 'green', value: 4 * c.retentionRiskCriticalSeconds },
              ], lowIsBad=true),
              g.secondsColumn('Retention'),
              {
                matcher: { id: 'byName', options: 'Share of retention left' },
                properties: [
                  { id: 'unit', value: 'percentunit' },
                  { id: 'decimals', value: 1 },
                  {
                    id: 'thresholds',
                    value: {
                      mode: 'absolute',
                      steps: [
                        { color: 'red', value: null },
                        { color: 'green', value: c.retentionRiskFraction },
                      ],
                    },
                  },
                  {
                    id: 'custom.cellOptions',
                    value: { type: 'color-text' },
                  },
                ],
              },
            ],
            noValue='No retention margin from the exporter (no topic with a time limit, or no group)',
            sortBy=[{ displayName: 'Time left', desc: false }],
          ),
          g.timeseries(
            32,
            'Retention margin by group and topic',
            'The same time left over time, for the 10 group and topic pairs with the least left at each instant. A group that does not move loses one second of margin per second; one that reads faster than records age gains it back.',
            { x: 12, y: 100, w: 12, h: 8 },
            [
              g.target('A', q('bottomk(10, min by (%(c)s, group, topic) (kafka_consumergroup_topic_min_retention_margin_seconds%(groupTopic)s))'), legend=q('{{group}} {{topic}} ({{%(c)s}})')),
            ],
            unit='s',
            calcs=['lastNotNull', 'min'],
            thresholds=[{ color: 'red', value: c.retentionRiskCriticalSeconds }],
          ),
          g.timeseries(
            33,
            'Lost records by group and topic',
            'Offsets retention deleted below the group\'s committed offsets, summed over the topic\'s partitions (kafka_consumergroup_topic_lost_records): records the group never committed past and, unless its consumers had already fetched them, never processed. With auto.offset.reset=earliest the consumers jump to the log start and this reads above 0 for a cycle or two only: look at the maximum. KafkaConsumerGroupLostRecords fires on any of it. A cluster where no group lost records shows one line at 0.',
            { x: 0, y: 108, w: 24, h: 7 },
            [
              g.target('A', q(|||
                max by (%(c)s, group, topic) (kafka_consumergroup_topic_lost_records%(groupTopic)s) > 0
                or on (%(c)s)
                label_replace(0 * kafka_lso_exporter_up%(kafkaCluster)s, "group", "(none lost)", "", "")
              |||), legend=q('{{group}} {{topic}} ({{%(c)s}})')),
            ],
            thresholds=[{ color: 'red', value: 1 }],
          ),
          // Isolation: one topic read with two rulers. A read_committed group counts offsets
          // up to the LSO, a read_uncommitted one up to the HW, and reads the records of
          // aborted transactions; their lags and offsets do not compare.
          g.row(34, 'Isolation: the groups of a topic by the ruler they read with', 115),
          g.table(
            35,
            'Groups of the topic and their isolation',
            'Every group with offsets on the selected topics, with its isolation.level as the exporter judges it from evidence (kafka_consumergroup_isolation_level): read_uncommitted once a group with live members committed past the LSO, read_committed once it waited at an LSO an open transaction held for a minute, mixed when its live members are proven on both sides, unknown until then (not reported: an exporter without the series). Two groups reading one topic with different isolation levels legitimately disagree, by the records of aborted transactions and whatever is still open, and lag 0 in both proves nothing: reconcile them by business key, never by offset. Aborted records read: records of aborted transactions the group read in the dashboard\'s time range (kafka_consumergroup_aborted_records_read_total); the status page / lists each transaction and its offset range. KafkaConsumerGroupReadsUncommitted, KafkaConsumerGroupMixedIsolation and KafkaConsumerGroupReadAbortedRecords fire on these.',
            { x: 0, y: 116, w: 14, h: 9 },
            [
              g.tableTarget('A', qi(|||
                max by (%(c)s, topic, group, isolation_level) (
                  kafka_consumergroup_topic_lso_lag%(groupTopic)s
                  * on (%(c)s, group) group_left (isolation_level)
                  topk by (%(c)s, group) (1, max by (%(c)s, group, isolation_level) (kafka_consumergroup_isolation_level%(isolation)s == 1))
                )
                or on (%(c)s, topic, group)
                label_replace(max by (%(c)s, topic, group) (kafka_consumergroup_topic_lso_lag%(groupTopic)s), "isolation_level", "not reported", "", "")
              |||)),
              g.tableTarget('B', q('max by (%(c)s, topic, group) (kafka_consumergroup_topic_hw_lag%(groupTopic)s)')),
              g.tableTarget('C', q('max by (%(c)s, topic, group) (kafka_consumergroup_topic_committed_beyond_lso%(groupTopic)s)')),
              // 0 for a group that reads committed (no counter): every row has a number.
              g.tableTarget('D', q('sum by (%(c)s, topic, group) (increase(kafka_consumergroup_aborted_records_read_total%(groupTopic)s[$__range])) or on (%(c)s, topic, group) (0 * max by (%(c)s, topic, group) (kafka_consumergroup_topic_lso_lag%(groupTopic)s))')),
            ],
            [
              { id: 'merge', options: {} },
              {
                id: 'organize',
                options: {
                  excludeByName: { Time: true },
                  indexByName: {
                    [c.kafkaClusterLabel]: 0,
                    topic: 1,
                    group: 2,
                    isolation_level: 3,
                    'Value #A': 4,
                    'Value #B': 5,
                    'Value #C': 6,
                    'Value #D': 7,
                  },
                  renameByName: {
                    isolation_level: 'Isolation',
                    'Value #A': 'LSO lag',
                    'Value #B': 'HW lag',
                    'Value #C': 'Beyond LSO',
                    'Value #D': 'Aborted records read',
                  },
                },
              },
            ],
            overrides=[
              g.groupLinkColumn,
              {
                matcher: { id: 'byName', options: 'Isolation' },
                properties: [
                  {
                    id: 'mappings',
                    value: [
                      {
                        type: 'value',
                        options: {
                          read_committed: { color: 'green', index: 0 },
                          read_uncommitted: { color: 'orange', index: 1 },
                          mixed: { color: 'red', index: 2 },
                          unknown: { color: 'text', index: 3 },
                          'not reported': { color: 'text', index: 4 },
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
              {
                matcher: { id: 'byName', options: 'Beyond LSO' },
                properties: [
                  {
                    id: 'thresholds',
                    value: {
                      mode: 'absolute',
                      steps: [
                        { color: 'green', value: null },
                        { color: 'orange', value: 1 },
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
                matcher: { id: 'byName', options: 'Aborted records read' },
                properties: [
                  {
                    id: 'thresholds',
                    value: {
                      mode: 'absolute',
                      steps: [
                        { color: 'green', value: null },
                        { color: 'red', value: 1 },
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
            noValue='No group has offsets on the selected topics',
            sortBy=[{ displayName: 'Aborted records read', desc: true }],
          ),
          g.timeseries(
            36,
            'Aborted records read by group and topic',
            'Records of aborted transactions each group read within the last %(w)s, at each instant (increase of kafka_consumergroup_aborted_records_read_total over %(w)s, what KafkaConsumerGroupReadAbortedRecords fires on): a read_uncommitted group whose committed offsets passed records whose transaction was then aborted. read_committed consumers never see those records; whatever the group did with them must be compensated downstream. The counter starts at 0 when the exporter starts or takes the cluster over, for groups it knows to read uncommitted. A cluster where no group read any shows one line at 0.' % { w: text.duration(c.abortedRecordsReadWindow) },
            { x: 14, y: 116, w: 10, h: 9 },
            [
              g.target('A', qi(|||
                sum by (%(c)s, group, topic) (increase(kafka_consumergroup_aborted_records_read_total%(groupTopic)s[%(abortedWindow)s])) > 0
                or on (%(c)s)
                label_replace(0 * kafka_lso_exporter_up%(kafkaCluster)s, "group", "(none read)", "", "")
              |||), legend=q('{{group}} {{topic}} ({{%(c)s}})')),
            ],
            thresholds=[{ color: 'red', value: 1 }],
          ),
        ],
      ),
  },
}
