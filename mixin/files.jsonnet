// Every file mixin/build writes, keyed by its path in the repository.
local mixin = import 'mixin.libsonnet';
local render = import 'lib/render.libsonnet';

local rules = render.rulesYaml(mixin);
local chart = 'deploy/helm/kafka-lso-exporter/files/';

{
  'alerts/kafka-lso-exporter.rules.yml': rules,
  [chart + 'kafka-lso-exporter.rules.yml']: rules,
}
+ {
  ['dashboards/' + name]: render.dashboardJson(mixin.grafanaDashboards[name])
  for name in std.objectFields(mixin.grafanaDashboards)
}
+ {
  [chart + 'dashboards/' + name]: render.dashboardJson(mixin.grafanaDashboards[name])
  for name in std.objectFields(mixin.grafanaDashboards)
}
