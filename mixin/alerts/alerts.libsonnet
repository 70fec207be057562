// Alerting rules: alerts/gpumem-alerts.yaml. The groups come in the order of the imports.
(import 'oom.libsonnet') +
(import 'allocator.libsonnet') +
(import 'imbalance.libsonnet') +
(import 'availability.libsonnet') +
{
  prometheusAlerts+:: {
    // The comment at the top of the rendered file (render.jsonnet); not part of the rules.
    header:: |||
      Alerting rules for gpumem-exporter.

      Load this file directly with Prometheus (`rule_files:`), together with gpumem-rules.yaml
      (the imbalance alerts read recorded series). The Helm chart embeds the same file.
      Rendered from the monitoring mixin in mixin/ (mixin/README.md): edit the mixin and render
      again, not this file; tests/mixin.sh fails when the two differ. Thresholds, selectors and
      `for` durations are the mixin's `_config`; the comments below explain the defaults.

      Design:
        - The exporter does the hard analysis itself: gpumem_oom_eta_seconds is already de-noised
          and credibility-checked, gpumem_leak_suspected already requires significance and
          persistence. These rules lean on those gauges; they never run deriv()/predict_linear()
          on raw used bytes, which swings by gigabytes on every step of a healthy training run.
        - Staleness-safe: no absent(), and every expression needs a series that exists now. When a
          GPU, a process or a node goes away its series go stale and its alerts resolve.
        - Labels: `instance` is the node, `job` the scrape job (matching `.*gpumem.*`),
          `exported_job` the training job (the scrape keeps `honor_labels: false`), `cluster`
          optional. See alerts/README.md.
        - GpuMemExporterDown and GpuMemDeviceDown inhibit the other alerts of the same node / GPU
          in Alertmanager (example in alerts/README.md).
    |||,
  },
}
