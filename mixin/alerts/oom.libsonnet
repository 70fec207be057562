// The exporter's OOM risk levels, paged (critical) and warned (high).
//
// Hidden fields on a rule only shape the rendered file: `comments` are printed above the rule
// (`above`) or above one of its fields.
local u = import '../lib/utils.libsonnet';
local query = {
  eta: '{{ with printf `gpumem_oom_eta_seconds{instance=%q,gpu=%q,pid=""}` $labels.instance $labels.gpu | query }}',
  used: '{{ with printf `gpumem_used_bytes{instance=%q,gpu=%q} / gpumem_total_bytes{instance=%q,gpu=%q}` $labels.instance $labels.gpu $labels.instance $labels.gpu | query }}',
  risk: '{{ with printf `gpumem_oom_risk_info{instance=%q,gpu=%q}` $labels.instance $labels.gpu | query }}',
  largest: '{{ with printf `topk(1, gpumem_process_used_bytes{instance=%q,gpu=%q})` $labels.instance $labels.gpu | query }}',
};
local largestProcess = 'Largest process: ' + query.largest + '{{ with . | first }}{{ .Labels.comm }} (pid {{ .Labels.pid }}, {{ .Value | humanize1024 }}B){{ end }}{{ else }}none reported{{ end }}.';

{
  prometheusAlerts+:: {
    local c = $._config,
    groups+: [
      {
        name: 'gpumem.alerts.oom',
        rules: [
          {
            alert: 'GpuMemoryOomImminent',
            comments:: { expr: |||
              The exporter's critical level: its forecast of the first allocation that fails is
              under `analysis.risk.critical_eta` (60 s by default), the allocator already retries on
              a GPU whose demand grows, or an allocation failed in the last minute (the job is down:
              someone must act). The exporter only forecasts from credible trends after a process's
              warm-up, and holds each level 15 s, so every level it reaches is seen by a scrape.
              No `for`: at a 15 s scrape and evaluation the page already waits up to 30 s for
              Prometheus (docs/alerts.md, the delay budget), and a minute is all a critical
              forecast leaves. `keep_firing_for`: a staircase can lose its forecast between two
              steps; the page holds across that gap to the crash instead of resolving.
            ||| },
            expr: |||
              gpumem_oom_risk_level{pid=""} >= %s
            ||| % u.num(c.oomImminentRiskLevel),
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
              largestProcess,
            ]),
          },
          {
            alert: 'GpuMemoryOomRiskHigh',
            comments:: { expr: |||
              The exporter's high level: its forecast is under `analysis.risk.high_eta` (5 min by
              default), the GPU is nearly full (95 %) while demand grows, or an OOM in the last 5
              minutes. Allocator retries without growth are tight but steady headroom
              (GpuMemoryHeadroomTight), not this. A full GPU that stays flat (a server that takes 90 %
              up front) is not high. The thresholds live in the exporter's configuration, not here.
              `for: 30s`: a blip of high shorter than 30 s does not warn; a forecast of "within
              5 minutes" still leaves minutes to act (docs/alerts.md, the delay budget).
            ||| },
            expr: |||
              gpumem_oom_risk_level{pid=""} >= %s
            ||| % u.num(c.oomRiskHighRiskLevel),
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
              largestProcess,
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
