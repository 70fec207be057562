// The exporter's OOM risk levels, paged (critical) and warned (high), and the out-of-memory
// errors themselves.
//
// Hidden fields on a rule only shape the rendered file: `comments` are printed above the rule
// (`above`) or above one of its fields.
local u = import '../lib/utils.libsonnet';
local query = {
  eta: '{{ with printf `gpumem_oom_eta_seconds{instance=%q,gpu=%q,pid=""}` $labels.instance $labels.gpu | query }}',
  used: '{{ with printf `gpumem_used_bytes{instance=%q,gpu=%q} / gpumem_total_bytes{instance=%q,gpu=%q}` $labels.instance $labels.gpu $labels.instance $labels.gpu | query }}',
  risk: '{{ with printf `gpumem_oom_risk_info{instance=%q,gpu=%q}` $labels.instance $labels.gpu | query }}',
  largest: '{{ with printf `topk(1, gpumem_process_used_bytes{instance=%q,gpu=%q})` $labels.instance $labels.gpu | query }}',
  event(family): '{{ with printf `%s{instance=%%q,uuid=%%q,event=%%q}` $labels.instance $labels.uuid $labels.event | query }}' % family,
};
local largestProcess = 'Largest process: ' + query.largest + '{{ with . | first }}{{ .Labels.comm }} (pid {{ .Labels.pid }}, {{ .Value | humanize1024 }}B){{ end }}{{ else }}none reported{{ end }}.';
// The incident's driver as the exporter names it (joined from gpumem_oom_risk_driver_info), or
// the largest process where it names none (memory no listed process accounts for); then the
// incident's other processes, read from the same series now: they join while it lasts, and the
// alert's labels must not change (a new label set would be a new alert, and a new page).
local incident = '{{ with printf `gpumem_oom_risk_driver_info{instance=%q,uuid=%q}` $labels.instance $labels.uuid | query }}{{ with . | first | label "others" }} Also in this incident: {{ . }}.{{ end }}{{ end }}';
local driver = '{{ if $labels.pid }}Driven by {{ or $labels.comm "process" }} (pid {{ $labels.pid }}{{ with $labels.pod }}, pod {{ $labels.namespace }}/{{ . }}{{ end }}).{{ else }}' + largestProcess + '{{ end }}' + incident + ' The alert ends when the processes of the incident have exited or no longer grow towards the limit.';
// The GPU's risk level at or above `level`, with the labels of its incident's driver: the
// exporter keeps them for the incident's life, and a new incident is a new alert (and a new
// page). An exporter that names no driver still alerts.
local withDriver(level) = |||
  (gpumem_oom_risk_level{pid=""} >= %(level)s)
    * on (instance, uuid) group_left (pid, comm, namespace, pod, container)
      gpumem_oom_risk_driver_info
  or
  (gpumem_oom_risk_level{pid=""} >= %(level)s)
    unless on (instance, uuid) gpumem_oom_risk_driver_info
||| % { level: u.num(level) };

{
  prometheusAlerts+:: {
    local c = $._config,
    groups+: [
      {
        name: 'gpumem.alerts.oom',
        [if c.oomAlertsInterval != null then 'interval']: c.oomAlertsInterval,
        rules: [
          {
            alert: 'GpuMemoryOomImminent',
            comments:: { expr: |||
              The exporter's critical level: its forecast of the first allocation that fails is
              under `analysis.risk.critical_eta` (60 s by default) and, for a smooth rise, no longer
              than the rise has been seen (before that it may still level off: a warning). An OOM
              that happened is not a level: it is GpuMemoryOomOccurred. The exporter only forecasts
              from credible trends after a process's warm-up, keeps a level while its ETA stays
              within a quarter past the threshold, and holds no level after its evidence is gone. It
              holds critical only while a process of the incident still expects to fail soon (its
              own risk is high or above, re-read every analysis; a smooth rise's ETA within twice
              the threshold), and lets go at once when the incident's processes exit (a crash, the end of the job, a kill): so no
              `keep_firing_for` here, and the page resolves at the first evaluation after. Joined
              with gpumem_oom_risk_driver_info, the alert is labelled with the incident's driver for
              the incident's life and names its other processes: several processes running one GPU
              out of memory together are one page; a new incident is a new alert and a new page.
              No `for`: at a 15 s scrape the page already waits up to 20 s for Prometheus (the
              scrape, then this group's own 5 s evaluation; docs/alerts.md, the delay budget), and
              a minute is all a critical forecast leaves.
            ||| },
            expr: withDriver(c.oomImminentRiskLevel),
            [if c.oomImminentFor != null then 'for']: c.oomImminentFor,
            [if c.oomImminentKeepFiringFor != null then 'keep_firing_for']: c.oomImminentKeepFiringFor,
            labels: { severity: 'critical' },
            annotations: {
              summary: 'GPU {{ $labels.gpu }} on {{ $labels.instance }} will run out of memory within about a minute.',
              runbook_url: c.runbookURLPattern % 'GpuMemoryOomImminent',
            } + u.description([
              'GPU {{ $labels.gpu }} ({{ $labels.uuid }}) on {{ $labels.instance }} is about to run out of memory:',
              query.eta + 'predicted OOM in {{ . | first | value | humanizeDuration }}{{ else }}no ETA{{ end }},',
              query.used + '{{ . | first | value | humanizePercentage }} used{{ else }}usage unknown{{ end }},',
              'risk reason ' + query.risk + '{{ . | first | label "reason" }}{{ else }}unknown{{ end }}.',
              driver,
            ]),
          },
          {
            alert: 'GpuMemoryOomRiskHigh',
            comments:: { expr: |||
              The exporter's high level: its forecast is under `analysis.risk.high_eta` (5 min by
              default), the GPU is nearly full (95 %) while demand grows, or the allocator retries
              while demand grows. Allocator retries without growth are tight but steady headroom
              (GpuMemoryHeadroomTight), not this. A full GPU that stays flat (a server that takes 90 %
              up front) is not high. The thresholds live in the exporter's configuration, not here.
              Named after the incident's driver, as the page is; it resolves when the incident's
              processes exit. `for: 30s`: a blip of high shorter than 30 s does not warn; a forecast of
              "within 5 minutes" still leaves minutes to act (docs/alerts.md, the delay budget).
            ||| },
            expr: withDriver(c.oomRiskHighRiskLevel),
            [if c.oomRiskHighFor != null then 'for']: c.oomRiskHighFor,
            [if c.oomRiskHighKeepFiringFor != null then 'keep_firing_for']: c.oomRiskHighKeepFiringFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'GPU {{ $labels.gpu }} on {{ $labels.instance }} is at high risk of running out of memory.',
              runbook_url: c.runbookURLPattern % 'GpuMemoryOomRiskHigh',
            } + u.description([
              'GPU {{ $labels.gpu }} ({{ $labels.uuid }}) on {{ $labels.instance }} is at',
              query.risk + 'risk level {{ . | first | label "level" }} (reason {{ . | first | label "reason" }}){{ else }}high risk{{ end }}:',
              query.eta + 'predicted OOM in {{ . | first | value | humanizeDuration }}{{ else }}no ETA now{{ end }},',
              query.used + '{{ . | first | value | humanizePercentage }} used{{ else }}usage unknown{{ end }}.',
              driver,
            ]),
          },
          {
            alert: 'GpuMemoryOomOccurred',
            comments:: { expr: |||
              An out-of-memory error: a process's client reported it (kind="reported"), or a process
              without a client vanished from a full GPU (kind="inferred"). The exporter serves one
              series per error for 2 minutes, numbered per GPU (`event`): every error is an alert of
              its own and fires once, however close two come. No `for`: it has happened. A warning:
              the job is down and someone should look, but the page about it (if the forecast saw it
              coming) went out before. The text says what failed and how the forecast did.
            ||| },
            expr: |||
              gpumem_oom_event_info
            |||,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Out of memory on GPU {{ $labels.gpu }} on {{ $labels.instance }}: {{ or $labels.comm "process" }} (pid {{ $labels.pid }}).',
              runbook_url: c.runbookURLPattern % 'GpuMemoryOomOccurred',
            } + u.description([
              '{{ if eq $labels.kind "inferred" }}{{ or $labels.comm "A process" }} (pid {{ $labels.pid }}), a process without the client, vanished from GPU {{ $labels.gpu }} ({{ $labels.uuid }}) on {{ $labels.instance }} while it was full: an out-of-memory error, inferred.',
              '{{- else }}{{ or $labels.comm "A process" }} (pid {{ $labels.pid }}{{ with $labels.exported_job }}, training job {{ . }}{{ end }}{{ with $labels.pod }}, pod {{ $labels.namespace }}/{{ . }}{{ end }}) ran out of memory on GPU {{ $labels.gpu }} ({{ $labels.uuid }}) on {{ $labels.instance }}.{{ end }}',
              query.event('gpumem_oom_event_request_bytes') + 'The request that failed: {{ . | first | value | humanize1024 }}B;{{ else }}The size of the failing request is unknown;{{ end }}',
              query.event('gpumem_oom_event_free_bytes') + '{{ . | first | value | humanize1024 }}B were free.{{ else }}free memory unknown.{{ end }}',
              '{{ if eq $labels.outcome "paged" }}The forecast paged ' + query.event('gpumem_oom_event_lead_seconds') + '{{ . | first | value | humanizeDuration }} {{ end }}before it.',
              '{{- else if eq $labels.outcome "warned" }}The forecast warned (high risk) ' + query.event('gpumem_oom_event_lead_seconds') + '{{ . | first | value | humanizeDuration }} {{ end }}before it, but did not page.',
              '{{- else }}The forecast did not see it coming.{{ end }}',
            ]),
          },
          {
            alert: 'GpuMemoryHeadroomTight',
            comments:: { expr: |||
              Tight but steady: the allocator flushed its cache to fit an allocation within the
              last minute, or the GPU's peak came within 5 % of full, while nothing grows towards
              the limit. Such a job runs until its inputs change (a longer sequence, a larger
              evaluation batch, a new neighbour), so it is worth a ticket, never a page.
              `for: 15m`: steady means it lasted.
            ||| },
            expr: |||
              gpumem_headroom_tight{pid=""} == 1
            |||,
            [if c.headroomTightFor != null then 'for']: c.headroomTightFor,
            labels: { severity: 'info' },
            annotations: {
              summary: 'GPU {{ $labels.gpu }} on {{ $labels.instance }} runs with little headroom, steadily.',
              runbook_url: c.runbookURLPattern % 'GpuMemoryHeadroomTight',
            } + u.description([
              'GPU {{ $labels.gpu }} ({{ $labels.uuid }}) on {{ $labels.instance }} has run close to full for %s without growing:' % c.headroomTightFor,
              query.used + '{{ . | first | value | humanizePercentage }} used now{{ else }}usage unknown{{ end }}.',
              largestProcess,
              'Nothing pages: this is headroom to win back (smaller evaluation batch, expandable_segments, fewer neighbours) before an input change tips it over.',
            ]),
          },
        ],
      },
    ],
  },
}
