// Every file mixin/build writes, keyed by its path in the repository. The chart's copies
// refer to the same values, so that each file is rendered once.
local mixin = import 'mixin.libsonnet';
local render = import 'lib/render.libsonnet';

local rules = render.rulesYaml(mixin);
local alertTexts = render.alertTextsYaml(mixin + { _config+:: { annotationPlaceholders: true } });
local chart = 'deploy/helm/kafka-lso-exporter/files/';
local dashboards = {
  [name]: render.dashboardJson(mixin.grafanaDashboards[name])
  for name in std.objectFields(mixin.grafanaDashboards)
};

{
  'alerts/kafka-lso-exporter.rules.yml': rules,
  [chart + 'kafka-lso-exporter.rules.yml']: rules,
  [chart + 'alert-texts.yaml']: alertTexts,
}
+ {
  ['dashboards/' + name]: dashboards[name]
  for name in std.objectFields(dashboards)
}
+ {
  [chart + 'dashboards/' + name]: dashboards[name]
  for name in std.objectFields(dashboards)
}
