// The text of the generated files, from a mixin (mixin.libsonnet with any _config
// overrides).
local manifest = import 'manifest.libsonnet';

{
  rulesYamlHeader:: |||
    # Prometheus recording and alerting rules for kafka-lso-exporter.
    #
    # Generated from mixin/ (recording rules in mixin/rules.libsonnet, alerts in
    # mixin/alerts.libsonnet, thresholds in mixin/config.libsonnet): do not edit here. Change the mixin and run mixin/build, which
    # rewrites this file and the Helm chart's copy; scripts/test fails while they differ.
    # alerts/tests.yml covers every rule, firing and not firing.
  |||,

  rulesYaml(mixin)::
    self.rulesYamlHeader + manifest.yaml(
      { groups: mixin.prometheusRules.groups + mixin.prometheusAlerts.groups },
      ['name', 'interval', 'rules', 'alert', 'record', 'expr', 'for', 'keep_firing_for', 'labels', 'annotations',
       'severity', 'summary', 'description', 'runbook_url'],
    ),

  // The Helm chart's annotation texts: those annotations of each rule that name the rule's
  // own threshold or `for`, with placeholders for them, keyed by alert and source severity.
  // `mixin` must be rendered with annotationPlaceholders.
  alertTextsYamlHeader:: |||
    # The annotations of alerts/kafka-lso-exporter.rules.yml that name an alert's own
    # threshold or `for`, keyed by alert and severity, with placeholders the chart's
    # prometheusrule template fills in from the threshold and `for` it renders:
    #   ${threshold}          the threshold as a number (5000, 0.05)
    #   ${threshold_seconds}  the threshold in seconds as words (15 minutes, 90 seconds)
    #   ${threshold_percent}  the threshold times 100 (25 for 0.25)
    #   ${for}                the rule's `for` as words (5 minutes; 1h30m as it is)
    # Generated from mixin/ by mixin/build: do not edit.
  |||,

  alertTextsYaml(mixin)::
    local rules = std.flattenArrays([g.rules for g in mixin.prometheusAlerts.groups]);
    local placeheld(rule) = {
      [k]: rule.annotations[k]
      for k in std.objectFields(rule.annotations)
      if std.length(std.findSubstr('${', rule.annotations[k])) > 0
    };
    local alerts = std.set([r.alert for r in rules if placeheld(r) != {}]);
    self.alertTextsYamlHeader + manifest.yaml(
      {
        [alert]: {
          [r.labels.severity]: placeheld(r)
          for r in rules
          if r.alert == alert && placeheld(r) != {}
        }
        for alert in alerts
      },
      ['summary', 'description'],
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
