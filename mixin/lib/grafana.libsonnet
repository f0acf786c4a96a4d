// What the dashboards share: the dashboard frame, template variables, query targets and
// the links between dashboards, built from the config.
local promql = import 'promql.libsonnet';

{
  new(c):: {
    local q = promql.new(c).fmt,
    local cl = c.clusterLabel,
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
      editable: true,
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
      templating: { list: variables },
      time: { from: c.dashboardPeriod, to: 'now' },
      timepicker: {},
      timezone: c.dashboardTimezone,
      title: title,
      uid: uid,
      version: 1,
      weekStart: '',
    },

    // Template variables. The Kafka cluster's is named `cluster` (queries use it as
    // $cluster) whatever the label is called. Every list comes from series the exporter
    // serves in both granularities: the topics from kafka_topic_partitions, the groups from
    // kafka_consumergroup_info; the partitions from kafka_partition_high_watermark, which in
    // `topic` granularity has only the partitions withheld by an open transaction.
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
      cluster: queryVariable('cluster', 'Cluster', q('label_values(kafka_lso_exporter_up%(exporter)s, %(c)s)')),
      topic: queryVariable('topic', 'Topic', q('label_values(kafka_topic_partitions%(cluster)s, topic)')),
      group: queryVariable('group', 'Consumer group', q('label_values(kafka_consumergroup_info%(cluster)s, group)')),
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

    // Data links from a table cell: a group to the consumer groups dashboard, a partition
    // to its history on the visibility dashboard.
    local link(uid, vars) =
      '/d/' + uid + '?${__url_time_range}&var-datasource=${datasource}&var-cluster=${__data.fields.' + cl + '}' + vars,
    groupLinkURL:: link(c.dashboardUIDs.consumerGroups, '&var-group=${__value.raw}'),
    partitionLinkURL:: link(c.dashboardUIDs.visibility, '&var-topic=${__data.fields.topic}&var-partition=${__value.raw}'),
  },
}
