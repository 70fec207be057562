// The default render: `jsonnet -J mixin mixin/render.jsonnet` prints what render.py turns into
// alerts/*.yaml and grafana/*.json.
(import 'lib/render.libsonnet')(import 'mixin.libsonnet')
