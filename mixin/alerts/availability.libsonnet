// The exporter and the GPUs it samples. Both inhibit the other alerts of the same node / GPU
// in Alertmanager (alerts/README.md).
local u = import '../lib/utils.libsonnet';

{
  prometheusAlerts+:: {
    local c = $._config,
    groups+: [
      {
        name: 'gpumem.alerts.availability',
        rules: [
          {
            alert: 'GpuMemExporterDown',
            comments:: { expr: |||
              Convention: the scrape job of the exporter contains "gpumem" (e.g. `gpumem-exporter`).
              While this fires no other gpumem alert of the node can fire: they are inhibited.
              2 minutes: ride out a restart of the exporter (a rolling update of the DaemonSet).
            ||| },
            expr: 'up{%s} == 0' % c.gpumemSelector,
            [if c.exporterDownFor != null then 'for']: c.exporterDownFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'gpumem-exporter on {{ $labels.instance }} cannot be scraped.',
              runbook_url: c.runbookURLPattern % 'GpuMemExporterDown',
            } + u.description([
              'Prometheus has failed to scrape {{ $labels.instance }} (scrape job {{ $labels.job }}) for ' + u.duration(c.exporterDownFor) + '.',
              'There are no GPU memory metrics for this node: OOM, leak and fragmentation alerts cannot fire for it.',
            ]),
          },
          {
            alert: 'GpuMemDeviceDown',
            comments:: { expr: |||
              The exporter could not sample this GPU (NVML error or missed deadline). A single
              missed deadline on a busy node flips one sample to 0; 1 minute ignores that. A GPU
              that is removed altogether loses its series and the alert resolves.
            ||| },
            expr: 'gpumem_device_up == 0',
            [if c.deviceDownFor != null then 'for']: c.deviceDownFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'GPU {{ $labels.gpu }} on {{ $labels.instance }} does not answer memory queries.',
              runbook_url: c.runbookURLPattern % 'GpuMemDeviceDown',
            } + u.description([
              'The exporter on {{ $labels.instance }} has failed to sample GPU {{ $labels.gpu }} ({{ $labels.uuid }}) for ' + u.duration(c.deviceDownFor),
              '{{- with printf `topk(1, increase(gpumem_exporter_sample_errors_total{instance=%q,gpu=%q}[5m]))` $labels.instance $labels.gpu | query }} (most errors: {{ . | first | label "kind" }}){{ end }}.',
              'Its memory metrics are stale or missing, and the other alerts of this GPU are inhibited.',
            ]),
          },
          {
            alert: 'GpuMemIngestDown',
            comments:: { expr: |||
              A configured ingest listener does not listen: the default socket path could not
              be bound (the exporter serves NVML's metrics without allocator reports), or the
              socket file was removed after start (a cleaner of /tmp, say). Allocator reports
              cannot reach the exporter: no leak or fragmentation from inside the processes, and
              forecasts on NVML's bytes alone. A listener that is not configured has no series.
            ||| },
            expr: 'gpumem_exporter_ingest_up == 0',
            [if c.ingestDownFor != null then 'for']: c.ingestDownFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'gpumem-exporter on {{ $labels.instance }} takes no allocator reports ({{ $labels.listener }} down).',
              runbook_url: c.runbookURLPattern % 'GpuMemIngestDown',
            } + u.description([
              'The {{ $labels.listener }} listener of the exporter on {{ $labels.instance }} has not been listening for ' + u.duration(c.ingestDownFor) + '.',
              'Training processes cannot report their allocators: leaks the cache hides and fragmentation go unseen, and forecasts rest on NVML alone.',
            ]),
          },
          {
            alert: 'GpuMemoryUnattributed',
            comments:: { expr: |||
              Used memory that no process NVML lists accounts for: a process in a container
              without the host's PID namespace, a context left by a dead process, leaked IPC
              handles. Both bounds: a few GiB on a small GPU, a few percent of a large one.
            ||| },
            expr: 'gpumem_unattributed_bytes > %d\nand\ngpumem_unattributed_bytes > %g * gpumem_total_bytes' % [c.unattributedMinBytes, c.unattributedMinRatio],
            [if c.unattributedFor != null then 'for']: c.unattributedFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'GPU {{ $labels.gpu }} on {{ $labels.instance }} holds memory no listed process accounts for.',
              runbook_url: c.runbookURLPattern % 'GpuMemoryUnattributed',
            } + u.description([
              '{{ $value | humanize1024 }}B of GPU {{ $labels.gpu }} ({{ $labels.uuid }}) on {{ $labels.instance }} has been in use for ' + u.duration(c.unattributedFor) + ' by no process NVML lists.',
              'The OOM forecast counts it as taken; it comes back only when whatever holds it lets go.',
            ]),
          },
        ],
      },
    ],
  },
}
