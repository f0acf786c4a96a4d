// kafka-lso-exporter's monitoring mixin: alerting rules (prometheusAlerts), recording rules
// (prometheusRules: how fast groups close their lag, from Prometheus's side) and Grafana
// dashboards (grafanaDashboards), all built from _config (config.libsonnet). The exporter
// serves its per-topic aggregates itself.
(import 'config.libsonnet')
+ (import 'rules.libsonnet')
+ (import 'alerts.libsonnet')
+ (import 'dashboards/dashboards.libsonnet')
