// The text of the generated files, from a mixin (mixin.libsonnet with any _config
// overrides).
local manifest = import 'manifest.libsonnet';

{
  rulesYamlHeader:: |||
    # Prometheus alerting rules for kafka-lso-exporter.
    #
    # Generated from mixin/ (rules in mixin/alerts.libsonnet, thresholds in
    # mixin/config.libsonnet): do not edit here. Change the mixin and run mixin/build, which
    # rewrites this file and the Helm chart's copy; scripts/test fails while they differ.
    # alerts/tests.yml covers every rule, firing and not firing.
  |||,

  rulesYaml(mixin)::
    self.rulesYamlHeader + manifest.yaml(
      mixin.prometheusAlerts,
      ['name', 'interval', 'rules', 'alert', 'record', 'expr', 'for', 'keep_firing_for', 'labels', 'annotations',
       'severity', 'summary', 'description', 'runbook_url'],
    ),

  // Dashboards and panels read best with their identity first and their queries (and
  // nested panels) last.
  dashboardJson(dashboard)::
    manifest.json(
      dashboard,
      ['id', 'type', 'uid', 'title', 'description', 'name', 'label', 'tags', 'datasource', 'gridPos',
       'x', 'y', 'w', 'h', 'collapsed', 'refId', 'expr', 'legendFormat', 'format', 'instant', 'range'],
      ['fieldConfig', 'options', 'targets', 'transformations', 'panels', 'templating'],
    ),
}
