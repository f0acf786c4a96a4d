// The Grafana dashboards (grafanaDashboards), keyed by file name.
(import 'visibility.libsonnet')
+ (import 'consumer-groups.libsonnet')
+ (import 'exporter-health.libsonnet')
