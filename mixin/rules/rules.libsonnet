// Recording rules: alerts/gpumem-rules.yaml. The groups come in the order of the imports.
(import 'capacity.libsonnet') +
(import 'jobs.libsonnet') +
(import 'forecast.libsonnet') +
{
  prometheusRules+:: {
    // The comment at the top of the rendered file (render.jsonnet); not part of the rules.
    header:: |||
      Recording rules for gpumem-exporter.

      Load this file directly with Prometheus (`rule_files:`); the Helm chart embeds the same file.
      Rendered from the monitoring mixin in mixin/ (mixin/README.md): edit the mixin and render
      again, not this file; tests/mixin.sh fails when the two differ.
      Names follow `level:metric:operations`. Label conventions (see alerts/README.md):
        - `instance`        the node (the scrape target), one exporter per node;
        - `cluster`         optional, added by relabelling when one Prometheus scrapes several
                            clusters; every aggregation keeps it, and it is simply absent otherwise;
        - `exported_job`    the training job reported by the process (the exporter's own `job`
                            label, renamed by Prometheus because the scrape keeps `honor_labels:
                            false`); `job` stays the scrape job.
      Every rule reads only series that are present now: when a GPU, a node or a process goes away
      its recorded series go stale with it, nothing keeps reporting a vanished target.
    |||,
  },
}
