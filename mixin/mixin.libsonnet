// gpumem-exporter monitoring mixin: prometheusAlerts, prometheusRules and grafanaDashboards,
// tuned through _config (config.libsonnet). mixin/README.md shows how to render and override.
(import 'config.libsonnet') +
(import 'alerts/alerts.libsonnet') +
(import 'rules/rules.libsonnet') +
(import 'dashboards/dashboards.libsonnet')
