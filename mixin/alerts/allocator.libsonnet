// Inside the allocator of one process: leaks, fragmentation, retries.
local u = import '../lib/utils.libsonnet';
local freeCache = '{{ with printf `gpumem_process_reserved_bytes{instance=%q,gpu=%q,pid=%q} - gpumem_process_allocated_bytes{instance=%q,gpu=%q,pid=%q}` $labels.instance $labels.gpu $labels.pid $labels.instance $labels.gpu $labels.pid | query }}Free cache now: {{ . | first | value | humanize1024 }}B.{{ end }}';

{
  prometheusAlerts+:: {
    local c = $._config,
    local serious = u.num(c.fragmentationSeriousRatio, 2),
    local severe = u.num(c.fragmentationSevereRatio, 2),
    local window = u.durationAdjective(c.fragmentationWindow),
    local fragmentationExpr(threshold) = |||
      avg_over_time(gpumem_fragmentation_ratio{pid!=""}[%(window)s]) >= %(threshold)s
      and
      gpumem_process_reserved_bytes > %(minReserved)s
    ||| % { window: c.fragmentationWindow, threshold: threshold, minReserved: u.num(c.fragmentationMinReservedBytes) },

    groups+: [
      {
        name: 'gpumem.alerts.allocator',
        rules: [
          {
            alert: 'GpuMemoryLeakSuspected',
            comments:: {
              expr: |||
                The exporter's verdict per process (significant, persistent rise of the memory floor,
                taken back once the floor has clearly stopped rising); the value is the floor's slope
                per minute, for the description.
              |||,
              'for': |||
                The exporter already demands persistence; 5 more minutes keep the alert from
                flapping across a phase change (train -> eval -> train). Leaks of a few hundred MiB/min
                take hours to fill a GPU, and a fast one pages through GpuMemoryOomImminent.
              |||,
            },
            expr: |||
              60 * gpumem_leak_slope_bytes_per_second{pid!=""}%s
              and
              gpumem_leak_suspected{pid!=""} == 1
            ||| % (if c.leakAlertMinSlopeBytesPerMinute > 0 then ' >= ' + u.num(c.leakAlertMinSlopeBytesPerMinute) else ''),
            [if c.leakFor != null then 'for']: c.leakFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Process {{ $labels.comm }} (pid {{ $labels.pid }}) on {{ $labels.instance }} GPU {{ $labels.gpu }} seems to leak GPU memory.',
              runbook_url: c.runbookURLPattern % 'GpuMemoryLeakSuspected',
            } + u.description([
              'The memory floor of {{ $labels.comm }} (pid {{ $labels.pid }}{{ with printf `gpumem_process_info{instance=%q,gpu=%q,pid=%q}` $labels.instance $labels.gpu $labels.pid | query }}{{ with . | first }}, job {{ .Labels.exported_job }}, rank {{ .Labels.rank }}{{ end }}{{ end }})',
              'on GPU {{ $labels.gpu }} of {{ $labels.instance }} rises by {{ $value | humanize1024 }}B/min.',
              "{{ with printf `gpumem_free_bytes{instance=%q,gpu=%q} / scalar(gpumem_leak_slope_bytes_per_second{instance=%q,gpu=%q,pid=%q})` $labels.instance $labels.gpu $labels.instance $labels.gpu $labels.pid | query }}At this rate the GPU's free memory lasts about {{ . | first | value | humanizeDuration }}.{{ end }}",
            ]),
          },
          {
            comments:: { above: |||
              Fragmentation: the share of a process's free cache that cannot serve a large request.
              Seed bands: < 0.15 good, < 0.30 moderate, < 0.40 serious, >= 0.40 severe.
              Averaged over 5 minutes (the ratio moves with every step of the sawtooth), only where
              the allocator holds a meaningful cache (reserved > 1 GiB: fragmentation of a tiny cache
              cannot starve a large request), and for 10 minutes so that the churn of a checkpoint,
              an evaluation pass or an empty_cache() cycle is ignored. The critical rule inhibits the
              warning one of the same process (alerts/README.md).
            ||| },
            alert: 'GpuMemoryFragmentationHigh',
            expr: fragmentationExpr(serious),
            [if c.fragmentationFor != null then 'for']: c.fragmentationFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Allocator cache of {{ $labels.comm }} (pid {{ $labels.pid }}) on {{ $labels.instance }} GPU {{ $labels.gpu }} is fragmented.',
              runbook_url: c.runbookURLPattern % 'GpuMemoryFragmentationHigh',
            } + u.description([
              '{{ $value | humanizePercentage }} of the free cache of {{ $labels.comm }} (pid {{ $labels.pid }}) on GPU {{ $labels.gpu }}',
              'of {{ $labels.instance }} cannot serve a large request (%s average; serious from %s, severe from %s).' % [window, serious, severe],
              freeCache,
            ]),
          },
          {
            alert: 'GpuMemoryFragmentationHigh',
            expr: fragmentationExpr(severe),
            [if c.fragmentationFor != null then 'for']: c.fragmentationFor,
            labels: { severity: 'critical' },
            annotations: {
              summary: 'Allocator cache of {{ $labels.comm }} (pid {{ $labels.pid }}) on {{ $labels.instance }} GPU {{ $labels.gpu }} is severely fragmented.',
              runbook_url: c.runbookURLPattern % 'GpuMemoryFragmentationHigh',
            } + u.description([
              '{{ $value | humanizePercentage }} of the free cache of {{ $labels.comm }} (pid {{ $labels.pid }}) on GPU {{ $labels.gpu }}',
              'of {{ $labels.instance }} cannot serve a large request (%s average, severe band >= %s):' % [window, severe],
              'large allocations fail or force cache flushes although memory looks free.',
              freeCache,
            ]),
          },
          {
            alert: 'GpuMemoryAllocatorRetries',
            comments:: { expr: |||
              Each retry means the allocator found no cached block, freed its whole cache
              (synchronising the device) and asked the driver again: the process runs at the edge of
              its memory and every retry stalls a step. A few retries while the cache takes shape
              (first steps, first evaluation pass) are normal; more than 5 in 5 minutes, kept up for
              another 5 minutes, is not. The `and` drops a process that has exited (its counter's
              window would otherwise keep the alert for 5 more minutes).
            ||| },
            expr: |||
              increase(gpumem_process_alloc_retries_total[%s]) > %s
              and
              gpumem_process_alloc_retries_total
            ||| % [c.allocRetriesWindow, u.num(c.allocRetriesThreshold)],
            [if c.allocRetriesFor != null then 'for']: c.allocRetriesFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Allocator of {{ $labels.comm }} (pid {{ $labels.pid }}) on {{ $labels.instance }} GPU {{ $labels.gpu }} keeps retrying allocations.',
              runbook_url: c.runbookURLPattern % 'GpuMemoryAllocatorRetries',
            } + u.description([
              'The allocator of {{ $labels.comm }} (pid {{ $labels.pid }}) on GPU {{ $labels.gpu }} of {{ $labels.instance }}',
              'freed its cache and retried {{ $value | printf "%.0f" }} allocations in the last ' + u.duration(c.allocRetriesWindow) + ':',
              'it runs at the edge of its memory and each retry stalls the step.',
            ]),
          },
        ],
      },
    ],
  },
}
