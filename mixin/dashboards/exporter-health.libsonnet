local grafana = import '../lib/grafana.libsonnet';
local promql = import '../lib/promql.libsonnet';
local text = import '../lib/text.libsonnet';

{
  grafanaDashboards+:: {
    local c = $._config,
    local g = grafana.new(c),
    local q = promql.new(c).fmt,

    'kafka-lso-exporter-health.json':
      g.dashboard(
        uid=c.dashboardUIDs.exporterHealth,
        title='kafka-lso-exporter health',
        description='Is the exporter reaching each cluster, how fresh and how complete are its samples.',
        variables=[g.variables.datasource, g.variables.kafkaCluster],
        panels=[
          {
            id: 1,
            type: 'stat',
            title: 'Cluster reachable',
            description: 'UP if the last sampling cycle reached the cluster. While DOWN, its partition and group series are absent and transaction alerts cannot fire.',
            datasource: g.datasource,
            gridPos: { x: 0, y: 0, w: 4, h: 4 },
            fieldConfig: {
              defaults: {
                unit: 'short',
                color: { mode: 'thresholds' },
                thresholds: {
                  mode: 'absolute',
                  steps: [
                    { color: 'red', value: null },
                    { color: 'green', value: 1 },
                  ],
                },
                mappings: [
                  {
                    type: 'value',
                    options: {
                      '0': { text: 'DOWN', color: 'red', index: 0 },
                      '1': { text: 'UP', color: 'green', index: 1 },
                    },
                  },
                ],
                noValue: 'Exporter not scraped',
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
              g.target('A', q('kafka_lso_exporter_up%(kafkaCluster)s'), legend=q('{{%(c)s}}')),
            ],
          },
          {
            id: 2,
            type: 'stat',
            title: 'Snapshot age',
            description: 'Time since the last cycle that reached the cluster ended. Values on the other dashboards are this old. Above %s (KafkaLsoExporterStale; 3 intervals at the default 15 s) they are stale.' % text.seconds(c.staleSeconds),
            datasource: g.datasource,
            gridPos: { x: 4, y: 0, w: 4, h: 4 },
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
              g.target('A', q('time() - kafka_lso_exporter_last_success_timestamp_seconds%(kafkaCluster)s'), legend=q('{{%(c)s}}')),
            ],
          },
          {
            id: 3,
            type: 'stat',
            title: 'Cycle duration p99',
            description: '99th percentile of the time one sampling cycle takes. Close to the interval (15 s by default), samples arrive late or cycles time out.',
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
                    { color: 'orange', value: 10 },
                  ],
                },
                mappings: [],
              },
              overrides: [],
            },
            options: {
              reduceOptions: {
                calcs: ['lastNotNull'],
                fields: '',
                values: false,
              },
              colorMode: 'value',
              graphMode: 'area',
              justifyMode: 'auto',
              orientation: 'auto',
              textMode: 'auto',
              wideLayout: true,
              showPercentChange: false,
            },
            targets: [
              g.target('A', q('histogram_quantile(0.99, sum by (%(c)s, le) (rate(kafka_lso_exporter_cycle_duration_seconds_bucket%(kafkaCluster)s[$__rate_interval])))'), legend=q('{{%(c)s}}')),
            ],
          },
          {
            id: 4,
            type: 'stat',
            title: 'Errors in range',
            description: 'Failed requests to Kafka in the selected time range, all stages. The affected partitions or groups have no values for those cycles.',
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
              g.instantTarget('A', q('sum(increase(kafka_lso_exporter_errors_total%(kafkaCluster)s[$__range]))'), legend='__auto'),
            ],
          },
          {
            id: 5,
            type: 'stat',
            title: 'Anomalies in range',
            description: 'Impossible offsets clamped to 0 in the selected time range (LSO above HW, commit beyond HW), e.g. after a leader change or log truncation. Occasional ones are harmless.',
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
                    { color: 'yellow', value: 1 },
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
              g.instantTarget('A', q('sum(increase(kafka_lso_exporter_anomalies_total%(kafkaCluster)s[$__range]))'), legend='__auto'),
            ],
          },
          {
            id: 6,
            type: 'stat',
            title: 'Version',
            description: 'Exporter versions running for the selected clusters. More than one box means a mixed deployment.',
            datasource: g.datasource,
            gridPos: { x: 20, y: 0, w: 4, h: 4 },
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
              graphMode: 'none',
              justifyMode: 'auto',
              orientation: 'auto',
              textMode: 'name',
              wideLayout: true,
              showPercentChange: false,
            },
            targets: [
              g.instantTarget('A', q(|||
                count by (version) (
                  kafka_lso_exporter_build_info%(exporter)s
                  and on (job, instance) kafka_lso_exporter_up%(kafkaCluster)s
                )
              |||), legend='{{version}}'),
            ],
          },
          {
            id: 7,
            type: 'row',
            title: 'Sampling',
            collapsed: false,
            gridPos: { x: 0, y: 4, w: 24, h: 1 },
            panels: [],
          },
          {
            id: 8,
            type: 'timeseries',
            title: 'Cycle duration',
            description: 'How long sampling cycles take: median, 99th percentile and average. A cycle that gets close to the interval (15 s by default) delays every value.',
            datasource: g.datasource,
            gridPos: { x: 0, y: 5, w: 12, h: 8 },
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
              },
              overrides: [],
            },
            options: {
              legend: {
                showLegend: true,
                displayMode: 'table',
                placement: 'bottom',
                calcs: ['mean', 'max'],
              },
              tooltip: { mode: 'multi', sort: 'desc' },
            },
            targets: [
              g.target('A', q('histogram_quantile(0.5, sum by (%(c)s, le) (rate(kafka_lso_exporter_cycle_duration_seconds_bucket%(kafkaCluster)s[$__rate_interval])))'), legend=q('p50 ({{%(c)s}})')),
              g.target('B', q('histogram_quantile(0.99, sum by (%(c)s, le) (rate(kafka_lso_exporter_cycle_duration_seconds_bucket%(kafkaCluster)s[$__rate_interval])))'), legend=q('p99 ({{%(c)s}})')),
              g.target('C', q(|||
                sum by (%(c)s) (rate(kafka_lso_exporter_cycle_duration_seconds_sum%(kafkaCluster)s[$__rate_interval]))
                / sum by (%(c)s) (rate(kafka_lso_exporter_cycle_duration_seconds_count%(kafkaCluster)s[$__rate_interval]))
              |||), legend=q('average ({{%(c)s}})')),
            ],
          },
          {
            id: 9,
            type: 'timeseries',
            title: 'Snapshot age',
            description: 'Time since the last cycle that reached each cluster. A sawtooth up to one interval is normal; a line that keeps rising means the cluster is not reached.',
            datasource: g.datasource,
            gridPos: { x: 12, y: 5, w: 12, h: 8 },
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
                    { color: 'orange', value: c.staleSeconds },
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
              g.target('A', q('time() - kafka_lso_exporter_last_success_timestamp_seconds%(kafkaCluster)s'), legend=q('{{%(c)s}}')),
            ],
          },
          {
            id: 10,
            type: 'state-timeline',
            title: 'Cluster reachable',
            description: 'Whether each sampling cycle reached the cluster. Red stretches are gaps in the transaction data.',
            datasource: g.datasource,
            gridPos: { x: 0, y: 13, w: 12, h: 6 },
            fieldConfig: {
              defaults: {
                color: { mode: 'thresholds' },
                mappings: [
                  {
                    type: 'value',
                    options: {
                      '0': { text: 'DOWN', color: 'red', index: 0 },
                      '1': { text: 'UP', color: 'green', index: 1 },
                    },
                  },
                ],
                thresholds: {
                  mode: 'absolute',
                  steps: [
                    { color: 'red', value: null },
                    { color: 'green', value: 1 },
                  ],
                },
                custom: { fillOpacity: 80, lineWidth: 0 },
              },
              overrides: [],
            },
            options: {
              showValue: 'never',
              mergeValues: true,
              alignValue: 'left',
              rowHeight: 0.9,
              legend: { showLegend: false, displayMode: 'list', placement: 'bottom' },
              tooltip: { mode: 'single', sort: 'none' },
            },
            targets: [
              g.target('A', q('kafka_lso_exporter_up%(kafkaCluster)s'), legend=q('{{%(c)s}}')),
            ],
          },
          {
            id: 11,
            type: 'timeseries',
            title: 'Sampled partitions and groups',
            description: 'How many partitions and topics the exporter samples (kafka_topic_partitions, served in both granularities), and how many groups have a member count. A dip means requests failed and those series are absent.',
            datasource: g.datasource,
            gridPos: { x: 12, y: 13, w: 12, h: 6 },
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
                calcs: ['lastNotNull', 'min'],
              },
              tooltip: { mode: 'multi', sort: 'desc' },
            },
            targets: [
              g.target('A', q('sum by (%(c)s) (kafka_topic_partitions%(kafkaCluster)s)'), legend=q('partitions ({{%(c)s}})')),
              g.target('B', q('count by (%(c)s) (kafka_topic_partitions%(kafkaCluster)s)'), legend=q('topics ({{%(c)s}})')),
              g.target('C', q('count by (%(c)s) (kafka_consumergroup_members%(kafkaCluster)s)'), legend=q('groups ({{%(c)s}})')),
            ],
          },
          {
            id: 12,
            type: 'row',
            title: 'Failures',
            collapsed: false,
            gridPos: { x: 0, y: 19, w: 24, h: 1 },
            panels: [],
          },
          {
            id: 13,
            type: 'timeseries',
            title: 'Errors by stage',
            description: 'Failed requests per second, by sampling stage. metadata or list_groups failures lose a whole cluster or all groups; the others lose single partitions or groups.',
            datasource: g.datasource,
            gridPos: { x: 0, y: 20, w: 12, h: 8 },
            fieldConfig: {
              defaults: {
                unit: 'cps',
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
              },
              overrides: [],
            },
            options: {
              legend: {
                showLegend: true,
                displayMode: 'table',
                placement: 'bottom',
                calcs: ['mean', 'max'],
              },
              tooltip: { mode: 'multi', sort: 'desc' },
            },
            targets: [
              g.target('A', q('sum by (%(c)s, stage) (rate(kafka_lso_exporter_errors_total%(kafkaCluster)s[$__rate_interval]))'), legend=q('{{stage}} ({{%(c)s}})')),
            ],
          },
          {
            id: 14,
            type: 'timeseries',
            title: 'Anomalies by kind',
            description: 'Impossible offsets clamped to 0, per second, by kind. Bursts around leader changes are expected; a steady rate is worth a look at the brokers.',
            datasource: g.datasource,
            gridPos: { x: 12, y: 20, w: 12, h: 8 },
            fieldConfig: {
              defaults: {
                unit: 'cps',
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
              },
              overrides: [],
            },
            options: {
              legend: {
                showLegend: true,
                displayMode: 'table',
                placement: 'bottom',
                calcs: ['mean', 'max'],
              },
              tooltip: { mode: 'multi', sort: 'desc' },
            },
            targets: [
              g.target('A', q('sum by (%(c)s, kind) (rate(kafka_lso_exporter_anomalies_total%(kafkaCluster)s[$__rate_interval]))'), legend=q('{{kind}} ({{%(c)s}})')),
            ],
          },
          {
            id: 15,
            type: 'table',
            title: 'Build info',
            description: 'Version and revision of each exporter instance that samples the selected clusters.',
            datasource: g.datasource,
            gridPos: { x: 0, y: 28, w: 24, h: 5 },
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
              overrides: [],
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
                max by (job, instance, version, revision) (
                  kafka_lso_exporter_build_info%(exporter)s
                  and on (job, instance) kafka_lso_exporter_up%(kafkaCluster)s
                )
              |||)),
            ],
            transformations: [
              {
                id: 'organize',
                options: {
                  excludeByName: { Time: true, Value: true },
                  indexByName: { job: 0, instance: 1, version: 2, revision: 3 },
                  renameByName: {},
                },
              },
            ],
          },
          g.row(16, 'Process', 33),
          // process_* of the exporter instances that sample the selected clusters; the
          // memory limit from kube-state-metrics when it runs (absent otherwise).
          g.timeseries(
            17,
            'Memory vs limit',
            'Resident memory of each exporter instance (process_resident_memory_bytes) and, where kube-state-metrics runs, the memory limit of its container (kube_pod_container_resource_limits). Memory grows with the number of series and with concurrent scrapes; a container at its limit is OOM-killed and restarts, and its series are absent meanwhile.',
            { x: 0, y: 34, w: 12, h: 8 },
            [
              g.target('A', q(|||
                max by (job, instance, namespace, pod) (
                  process_resident_memory_bytes%(exporter)s
                  and on (job, instance) kafka_lso_exporter_up%(kafkaCluster)s
                )
              |||), legend='resident {{instance}}'),
              g.target('B', q(|||
                max by (namespace, pod) (kube_pod_container_resource_limits{resource="memory", container="kafka-lso-exporter"%(andCluster)s})
                  and on (namespace, pod) (process_resident_memory_bytes%(exporter)s and on (job, instance) kafka_lso_exporter_up%(kafkaCluster)s)
              |||), legend='limit {{pod}}'),
            ],
            unit='bytes',
            decimals=null,
            overrides=[{
              matcher: { id: 'byFrameRefID', options: 'B' },
              properties: [
                { id: 'custom.lineStyle', value: { fill: 'dash', dash: [10, 10] } },
                { id: 'color', value: { mode: 'fixed', fixedColor: 'red' } },
              ],
            }],
          ),
          g.timeseries(
            18,
            'CPU',
            'CPU time each exporter instance uses per second (rate of process_cpu_seconds_total): 1 is one core.',
            { x: 12, y: 34, w: 12, h: 8 },
            [
              g.target('A', q(|||
                max by (job, instance, namespace, pod) (
                  rate(process_cpu_seconds_total%(exporter)s[$__rate_interval])
                  and on (job, instance) kafka_lso_exporter_up%(kafkaCluster)s
                )
              |||), legend='{{instance}}'),
            ],
            decimals=null,
            calcs=['mean', 'max'],
          ),
        ],
      ),
  },
}
