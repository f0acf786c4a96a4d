// kafka-lso-exporter's monitoring mixin: alerting rules (prometheusAlerts) and Grafana
// dashboards (grafanaDashboards), both built from _config (config.libsonnet). The exporter
// serves its aggregates itself, so there are no recording rules.
(import 'config.libsonnet')
+ (import 'alerts.libsonnet')
+ (import 'dashboards/dashboards.libsonnet')
