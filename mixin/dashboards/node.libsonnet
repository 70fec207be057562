// Node and GPU detail: used against capacity and peaks, time to OOM, risk, processes, NVML
// against the allocators, the exporter's own health.
local u = import '../lib/utils.libsonnet';
local lib = import 'lib.libsonnet';
local vars = import 'variables.libsonnet';
local m = vars.match;

{
  grafanaDashboards+:: {
    local c = $._config,

    'gpumem-node.json': lib.dashboard(
      c,
      c.dashboardUids.node,
      'Node and GPU detail',
      "One node's GPUs: used memory against capacity and peaks, predicted time to OOM, risk level, the processes on each GPU, what NVML sees against what the allocators report, and the out-of-memory errors (also annotations) with what the forecast said before each.",
      [vars.cluster, vars.instance, vars.gpu, vars.pid],
      [
        lib.timeseries(
          'Used memory, capacity and peak',
          'NVML `used` of each GPU with its installed memory and the highest `used` of the last 5 minutes and since the exporter started.',
          'bytes',
          [
            lib.range('gpumem_used_bytes{%s}' % m.gpu, 'GPU {{gpu}} used'),
            lib.range('gpumem_total_bytes{%s}' % m.gpu, 'GPU {{gpu}} installed'),
            lib.range('gpumem_peak_used_bytes{%s, window!="lifetime"}' % m.gpu, 'GPU {{gpu}} peak {{window}}'),
            lib.range('gpumem_peak_used_bytes{%s, window="lifetime"}' % m.gpu, 'GPU {{gpu}} peak lifetime'),
          ],
        ) + lib.withOverrides([
          lib.override('.*installed', { 'custom.lineStyle': { fill: 'dash', dash: [10, 10] } }),
        ]) + lib.at(0, 0, 16, 9),
        lib.bargauge(
          'Share used now',
          "Used / installed per GPU; %s-%s %% is the warning band." % [u.percent(c.usedRatioWarning), u.percent(c.usedRatioCritical)],
          [lib.instant('instance_gpu:gpumem_used:ratio{%s}' % m.gpu, '{{instance}} GPU {{gpu}}', table=false)],
          [[c.usedRatioWarning, 'orange'], [c.usedRatioCritical, 'red']],
        ) + lib.at(16, 0, 8, 9),

        lib.timeseries(
          'Predicted time to OOM',
          "gpumem_oom_eta_seconds: seconds until the first allocation on the GPU fails, present only while the GPU is on course to run out and a demand trend is credible; earliest and latest: gpumem_oom_eta_lower_seconds and gpumem_oom_eta_upper_seconds, the bounds calibrated on recorded crashes (the truth fell between them at most seconds of the corpus; docs/forecast.md). The exporter's critical level (ETA under 60 s) pages (GpuMemoryOomImminent).",
          's',
          [
            lib.range('gpumem_oom_eta_seconds{%s, pid=""}' % m.gpu, '{{instance}} GPU {{gpu}}'),
            lib.range('gpumem_oom_eta_lower_seconds{%s}' % m.gpu, '{{instance}} GPU {{gpu}} earliest'),
            lib.range('gpumem_oom_eta_upper_seconds{%s}' % m.gpu, '{{instance}} GPU {{gpu}} latest'),
          ],
          base='red',
          steps=[[60, 'orange'], [600, 'green']],
          thresholdsStyle='line',
        ) + lib.at(0, 9, 12, 8),
        lib.stateTimeline(
          'OOM risk level',
          'Exporter risk level per GPU: low, medium, high, critical. Tight but steady headroom (allocator retries or peaks near full, nothing growing) is medium at most, with gpumem_headroom_tight = 1: a ticket (GpuMemoryHeadroomTight), never a page.',
          [lib.range('gpumem_oom_risk_level{%s, pid=""}' % m.gpu, '{{instance}} GPU {{gpu}}')],
          lib.valueMappings(lib.riskLevels),
          'green',
          lib.riskSteps,
        ) + lib.at(12, 9, 12, 8),

        lib.timeseries('Memory by process (NVML)', 'What NVML attributes to each process on each GPU, stacked.', 'bytes', [
          lib.range('gpumem_process_used_bytes{%s}' % m.process, 'GPU {{gpu}} {{comm}} ({{pid}})'),
        ], stacked=true) + lib.at(0, 17, 12, 9),
        lib.table('Risk now', 'Risk level and its reason per GPU.', 'none', [
          lib.instant('gpumem_oom_risk_info{%s}' % m.gpu),
        ], hide=['Time', '__name__', 'job', 'Value']) + lib.at(12, 17, 12, 9),

        lib.timeseries(
          'NVML against allocator',
          "Per GPU: NVML memory of the processes, the allocators' reserved and allocated bytes, and the overhead outside the allocator (CUDA context, libraries). A leak shows in `allocated` long before NVML moves, while the cache absorbs it.",
          'bytes',
          [
            lib.range('sum by (instance, gpu) (gpumem_process_used_bytes{%s})' % m.gpu, 'GPU {{gpu}} NVML used by processes'),
            lib.range('sum by (instance, gpu) (gpumem_process_reserved_bytes{%s})' % m.gpu, 'GPU {{gpu}} allocator reserved'),
            lib.range('sum by (instance, gpu) (gpumem_process_allocated_bytes{%s})' % m.gpu, 'GPU {{gpu}} allocator allocated'),
            lib.range('sum by (instance, gpu) (gpumem_process_overhead_bytes{%s})' % m.gpu, 'GPU {{gpu}} overhead'),
          ],
        ) + lib.at(0, 26, 12, 9),
        lib.timeseries('Driver reservation, free and unattributed', "NVML `reserved` (the driver's own share), `free`, and used memory no listed process accounts for (another PID namespace, a dead process's context, leaked IPC handles) per GPU.", 'bytes', [
          lib.range('gpumem_reserved_bytes{%s}' % m.gpu, 'GPU {{gpu}} driver reserved'),
          lib.range('gpumem_free_bytes{%s}' % m.gpu, 'GPU {{gpu}} free'),
          lib.range('gpumem_unattributed_bytes{%s}' % m.gpu, 'GPU {{gpu}} unattributed'),
        ]) + lib.at(12, 26, 12, 9),

        lib.stateTimeline(
          'Device up',
          '1 while the exporter samples the GPU; 0 when NVML failed or missed its deadline.',
          [lib.range('gpumem_device_up{%s}' % m.gpu, '{{instance}} GPU {{gpu}}')],
          lib.valueMappings([[0, 'down', 'red'], [1, 'up', 'green']]),
          'red',
          [[1, 'green']],
        ) + lib.at(0, 35, 12, 6),
        lib.timeseries(
          'Exporter sample time and errors',
          'Wall time of the last sample of all GPUs, and failed GPU queries per second by kind.',
          's',
          [
            lib.range('gpumem_exporter_sample_duration_seconds{%s}' % m.node, '{{instance}} sample time'),
            lib.range('sum by (instance, gpu, kind) (rate(gpumem_exporter_sample_errors_total{%s}[$__rate_interval]))' % m.gpu, '{{instance}} GPU {{gpu}} {{kind}} errors/s'),
          ],
        ) + lib.withOverrides([lib.override('.*errors/s', { unit: 'reqps' })]) + lib.at(12, 35, 12, 6),

        lib.table('GPUs', "Descriptive data of the node's GPUs.", 'none', [
          lib.instant('gpumem_gpu_info{%s}' % m.gpu),
        ], hide=['Time', '__name__', 'job', 'Value']) + lib.at(0, 41, 24, 6),

        lib.timeseries(
          'Out-of-memory errors and what the forecast said',
          'Out-of-memory errors per GPU and interval, by what the GPU showed when they came: paged (critical), warned (high only), missed; reported by a client or inferred (a process without one vanished from a full GPU). Each is also an annotation and a GpuMemoryOomOccurred alert.',
          'none',
          [
            lib.range('sum by (instance, gpu, kind, outcome) (increase(gpumem_forecast_ooms_total{%s}[$__rate_interval]))' % m.gpu, 'GPU {{gpu}} {{kind}} {{outcome}}'),
          ],
          drawStyle='bars',
        ) + lib.at(0, 47, 12, 8),
        lib.table(
          'Pages and the out-of-memory errors that followed',
          'Over the time range, per GPU: critical episodes (one per page) an out-of-memory error followed and those none followed (a false alarm, or someone acted), and OOMs by what the forecast said.',
          'none',
          [
            lib.instant('sum by (instance, gpu, outcome) (increase(gpumem_forecast_critical_episodes_total{%s}[$__range]))' % m.gpu),
            lib.instant('sum by (instance, gpu, outcome) (increase(gpumem_forecast_ooms_total{%s}[$__range]))' % m.gpu),
          ],
          hide=['Time'],
          rename={ 'Value #A': 'critical episodes', 'Value #B': 'OOMs' },
        ) + lib.at(12, 47, 12, 8),
      ],
      annotations=[lib.oomAnnotation(m.gpu)],
    ),
  },
}
