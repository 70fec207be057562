// Grafana dashboards: grafana/<file>. Each file name is the dashboard's default uid.
(import 'cluster.libsonnet') +
(import 'node.libsonnet') +
(import 'process.libsonnet')
