// What the dashboards share: the dashboard frame, template variables, query targets and
// the links between dashboards, built from the config.
local promql = import 'promql.libsonnet';

{
  new(c):: {
    local q = promql.new(c).fmt,
    local kcl = c.kafkaClusterLabel,
    local datasource = { type: 'prometheus', uid: '${datasource}' },

    datasource:: datasource,

    dashboard(uid, title, description, variables, panels):: {
      annotations: {
        list: [{
          builtIn: 1,
          datasource: { type: 'grafana', uid: '-- Grafana --' },
          enable: true,
          hide: true,
          iconColor: 'rgba(0, 211, 255, 1)',
          name: 'Annotations & Alerts',
          type: 'dashboard',
        }],
      },
      description: description,
      // Generated: a change made in Grafana is lost at the next provisioning (Save as... keeps
      // a copy).
      editable: false,
      fiscalYearStartMonth: 0,
      graphTooltip: 1,
      id: null,
      // The other dashboards of the exporter, by their tags.
      links: [{
        title: 'kafka-lso-exporter',
        type: 'dashboards',
        tags: c.dashboardTags,
        asDropdown: true,
        includeVars: true,
        keepTime: true,
        icon: 'external link',
        targetBlank: false,
        tooltip: '',
        url: '',
      }],
      panels: panels,
      refresh: c.dashboardRefresh,
      schemaVersion: 39,
      tags: c.dashboardTags,
      // With showMultiCluster, the `cluster` variable after the data source's.
      local multiCluster = if c.showMultiCluster then [$.new(c).variables.cluster] else [],
      templating: {
        list: [v for v in variables if v.name == 'datasource'] + multiCluster
              + [v for v in variables if v.name != 'datasource'],
      },
      time: { from: c.dashboardPeriod, to: 'now' },
      timepicker: {},
      timezone: c.dashboardTimezone,
      title: title,
      uid: uid,
      version: 1,
      weekStart: '',
    },

    // Template variables. The Kafka cluster's is named `kafka_cluster` (queries use it as
    // $kafka_cluster) whatever the label is called; `cluster`, with showMultiCluster, is
    // the Prometheus or Kubernetes cluster's (clusterLabel), as in the other mixins. Every
    // list comes from series the exporter serves in both granularities: the topics from
    // kafka_topic_partitions, the groups from kafka_consumergroup_info; the partitions from
    // kafka_partition_high_watermark, which in `topic` granularity has only the partitions
    // withheld by an open transaction.
    local queryVariable(name, label, query) = {
      name: name,
      label: label,
      type: 'query',
      datasource: datasource,
      definition: query,
      query: query,
      refresh: 2,
      regex: '',
      sort: 1,
      multi: true,
      includeAll: true,
      hide: 0,
      options: [],
      skipUrlSync: false,
      allValue: '.+',
      current: { selected: true, text: ['All'], value: ['$__all'] },
    },
    variables:: {
      datasource: {
        name: 'datasource',
        label: 'Data source',
        type: 'datasource',
        query: 'prometheus',
        current: {},
        hide: 0,
        refresh: 1,
        regex: '',
        includeAll: false,
        multi: false,
        options: [],
        skipUrlSync: false,
      },
      // One cluster at a time: the Kafka clusters' names may repeat across them.
      cluster: queryVariable('cluster', 'Cluster', 'label_values(kafka_lso_exporter_build_info%s, %s)' % [
        promql.selector(c, []),
        c.clusterLabel,
      ]) + {
        multi: false,
        includeAll: false,
        current: {},
        allValue:: null,
      },
      kafkaCluster: queryVariable('kafka_cluster', 'Kafka cluster', q('label_values(kafka_lso_exporter_up%(exporter)s, %(c)s)')),
      topic: queryVariable('topic', 'Topic', q('label_values(kafka_topic_partitions%(kafkaCluster)s, topic)')),
      group: queryVariable('group', 'Consumer group', q('label_values(kafka_consumergroup_info%(kafkaCluster)s, group)')),
      partition: queryVariable('partition', 'Partition', q('label_values(kafka_partition_high_watermark%(topic)s, partition)')) + {
        sort: 3,
        multi: false,
        includeAll: false,
        current: {},
        allValue:: null,
      },
    },

    // Query targets: a range query (time series, stats), an instant one (stats of the
    // whole range), and an instant one as a table.
    target(refId, expr, legend='__auto'):: {
      datasource: datasource,
      editorMode: 'code',
      expr: expr,
      refId: refId,
      instant: false,
      range: true,
      legendFormat: legend,
    },
    instantTarget(refId, expr, legend='__auto'):: self.target(refId, expr, legend) + {
      instant: true,
      range: false,
    },
    tableTarget(refId, expr):: self.target(refId, expr) + {
      format: 'table',
      instant: true,
      range: false,
      legendFormat:: null,
    },

    // Panels, in the shape of the dashboards' hand-written ones: a row, a time series, a
    // table. `thresholds` are the steps after green; `overrides` and `transformations`
    // are Grafana's own.
    row(id, title, y):: {
      id: id,
      type: 'row',
      title: title,
      collapsed: false,
      gridPos: { x: 0, y: y, w: 24, h: 1 },
      panels: [],
    },

    local steps(thresholds) = [{ color: 'green', value: null }] + thresholds,

    timeseries(id, title, description, gridPos, targets, unit='short', decimals=0, min=0, stacking='none',
               calcs=['lastNotNull', 'max'], thresholds=[], noValue=null, overrides=[]):: {
      id: id,
      type: 'timeseries',
      title: title,
      description: description,
      datasource: datasource,
      gridPos: gridPos,
      fieldConfig: {
        defaults: {
          unit: unit,
          color: { mode: 'palette-classic' },
          custom: {
            drawStyle: 'line',
            lineInterpolation: 'linear',
            lineWidth: 1,
            fillOpacity: if stacking == 'none' then 0 else 20,
            gradientMode: 'none',
            showPoints: 'never',
            pointSize: 4,
            spanNulls: false,
            axisPlacement: 'auto',
            axisLabel: '',
            stacking: { mode: stacking, group: 'A' },
            thresholdsStyle: { mode: if thresholds == [] then 'off' else 'dashed' },
            lineStyle: { fill: 'solid' },
          },
          thresholds: {
            mode: 'absolute',
            steps: steps(thresholds),
          },
          mappings: [],
          [if min != null then 'min']: min,
          [if decimals != null then 'decimals']: decimals,
          [if noValue != null then 'noValue']: noValue,
        },
        overrides: overrides,
      },
      options: {
        legend: {
          showLegend: true,
          displayMode: 'table',
          placement: 'bottom',
          calcs: calcs,
        },
        tooltip: { mode: 'multi', sort: 'desc' },
      },
      targets: targets,
    },

    table(id, title, description, gridPos, targets, transformations, overrides=[], noValue=null, sortBy=[]):: {
      id: id,
      type: 'table',
      title: title,
      description: description,
      datasource: datasource,
      gridPos: gridPos,
      fieldConfig: {
        defaults: {
          unit: 'short',
          decimals: 0,
          color: { mode: 'thresholds' },
          thresholds: {
            mode: 'absolute',
            steps: steps([]),
          },
          mappings: [],
          custom: {
            align: 'auto',
            cellOptions: { type: 'auto' },
            inspect: false,
            filterable: true,
          },
          [if noValue != null then 'noValue']: noValue,
        },
        overrides: overrides,
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
        [if sortBy != [] then 'sortBy']: sortBy,
      },
      targets: targets,
      transformations: transformations,
    },

    // Table column overrides: a duration in seconds coloured by `thresholds` (the steps
    // after green, or after red with lowIsBad: time left), and the group link.
    secondsColumn(name, thresholds=[], lowIsBad=false):: {
      matcher: { id: 'byName', options: name },
      properties: [
        { id: 'unit', value: 's' },
        { id: 'decimals', value: 0 },
      ] + (if thresholds == [] then [] else [
             {
               id: 'thresholds',
               value: {
                 mode: 'absolute',
                 steps: if lowIsBad then [{ color: 'red', value: null }] + thresholds
                 else [{ color: 'green', value: null }] + thresholds,
               },
             },
             {
               id: 'custom.cellOptions',
               value: { type: 'color-background', mode: 'basic' },
             },
           ]),
    },
    groupLinkColumn:: {
      matcher: { id: 'byName', options: 'group' },
      properties: [
        {
          id: 'links',
          value: [
            {
              title: 'Open this group\'s lag',
              url: $.new(c).groupLinkURL,
            },
          ],
        },
      ],
    },

    // Data links from a table cell: a group to the consumer groups dashboard, a partition
    // to its history on the visibility dashboard.
    local link(uid, vars) =
      '/d/' + uid + '?${__url_time_range}&var-datasource=${datasource}'
      + (if c.showMultiCluster then '&var-cluster=${cluster}' else '')
      + '&var-kafka_cluster=${__data.fields.' + kcl + '}' + vars,
    groupLinkURL:: link(c.dashboardUIDs.consumerGroups, '&var-group=${__value.raw}'),
    partitionLinkURL:: link(c.dashboardUIDs.visibility, '&var-topic=${__data.fields.topic}&var-partition=${__value.raw}'),
  },
}
