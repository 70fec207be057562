// Process and training job: inside one process's allocator (allocated, reserved, fragmentation,
// leak slope, retries, model memory) and the ranks of one training job; phase changes as
// annotations.
local u = import '../lib/utils.libsonnet';
local lib = import 'lib.libsonnet';
local vars = import 'variables.libsonnet';
local m = vars.match;

{
  grafanaDashboards+:: {
    local c = $._config,
    local legend = '{{comm}} ({{pid}}) GPU {{gpu}}',
    local fragmentationSteps = [
      [c.fragmentationModerateRatio, 'yellow'],
      [c.fragmentationSeriousRatio, 'orange'],
      [c.fragmentationSevereRatio, 'red'],
    ],
    local moderate = u.num(c.fragmentationModerateRatio, 2),
    local serious = u.num(c.fragmentationSeriousRatio, 2),
    local severe = u.num(c.fragmentationSevereRatio, 2),
    local leakPerSecond = c.leakSlopeWarningBytesPerMinute / 60,

    'gpumem-process.json': lib.dashboard(
      c,
      c.dashboardUids.process,
      'Process and training job',
      "Inside one process's allocator and one training job: allocated against reserved against NVML, fragmentation, leak slope, retries and OOMs, model memory by component, ranks of the job. Phase changes and out-of-memory errors are annotations.",
      [
        vars.cluster,
        vars.instance,
        vars.gpu,
        vars.job,
        vars.pid,
        lib.textboxVariable(
          'step_phases',
          'Phases not marked',
          c.stepPhases,
          description='Regex of phases entered on every training step; they are not drawn as phase-change annotations (they would cover the graphs).',
        ),
      ],
      [
        lib.timeseries(
          'Allocated, reserved and NVML used',
          "Live tensors (allocated), what the allocator holds (reserved), what NVML attributes to the process (reserved + CUDA context and libraries), and the allocator's own peak.",
          'bytes',
          [
            lib.range('gpumem_process_allocated_bytes{%s}' % m.process, legend + ' allocated'),
            lib.range('gpumem_process_reserved_bytes{%s}' % m.process, legend + ' reserved'),
            lib.range('gpumem_process_used_bytes{%s}' % m.process, legend + ' NVML used'),
            lib.range('gpumem_process_allocated_peak_bytes{%s}' % m.process, legend + ' allocated peak'),
          ],
        ) + lib.at(0, 0, 24, 9),

        lib.timeseries(
          'Fragmentation ratio',
          'Share of the free cache that cannot serve a large request (1 - largest free block / free cache). Seed bands: < %(mo)s good, < %(se)s moderate, < %(sv)s serious, >= %(sv)s severe. GpuMemoryFragmentationHigh: %(w)s average >= %(se)s (warning) / %(sv)s (critical) for %(for)s.' % {
            mo: moderate,
            se: serious,
            sv: severe,
            w: u.durationAdjective(c.fragmentationWindow),
            'for': u.duration(c.fragmentationFor),
          },
          'percentunit',
          [lib.range('gpumem_fragmentation_ratio{%s}' % m.process, legend)],
          steps=fragmentationSteps,
          max=1,
          thresholdsStyle='line+area',
        ) + lib.at(0, 9, 12, 8),
        lib.timeseries(
          'Cached but unallocated ratio',
          "(reserved - allocated) / reserved: often called 'fragmentation'. Most of it is whole free segments that are reusable; read it with the fragmentation ratio.",
          'percentunit',
          [lib.range('gpumem_cached_unallocated_ratio{%s}' % m.process, legend)],
          steps=fragmentationSteps,
          max=1,
          thresholdsStyle='line',
        ) + lib.at(12, 9, 12, 8),

        lib.timeseries(
          'Free cache: largest block and split slivers',
          'Free cached bytes, the largest free block (the biggest request the cache serves without the driver) and free bytes inside split segments.',
          'bytes',
          [
            lib.range('gpumem_process_reserved_bytes{%s} - gpumem_process_allocated_bytes{%s}' % [m.process, m.process], '{{comm}} ({{pid}}) free cache'),
            lib.range('gpumem_process_largest_free_block_bytes{%s}' % m.process, '{{comm}} ({{pid}}) largest free block'),
            lib.range('gpumem_process_inactive_split_bytes{%s}' % m.process, '{{comm}} ({{pid}}) inactive split'),
          ],
        ) + lib.at(0, 17, 12, 8),
        lib.timeseries('Segments', 'Segments the allocator holds; many small segments go with fragmentation.', 'none', [
          lib.range('gpumem_process_segments{%s}' % m.process, legend),
        ]) + lib.at(12, 17, 12, 8),

        lib.timeseries(
          'Leak slope of the memory floor',
          "Robust slope of the per-window minimum of allocated bytes (the floor), after warm-up. The default leak threshold is %s MB/min (~%s KB/s)." % [
            u.num(c.leakSlopeWarningBytesPerMinute / (1024 * 1024)),
            u.num(u.round(leakPerSecond / 1000)),
          ],
          'binBps',
          [lib.range('gpumem_leak_slope_bytes_per_second{%s}' % m.process, legend)],
          steps=[[u.round(leakPerSecond), 'orange']],
          // A slope can be negative: no minimum.
          min=null,
          thresholdsStyle='line',
        ) + lib.at(0, 25, 12, 8),
        lib.stateTimeline(
          'Leak suspected',
          "The exporter's verdict: significant and persistent rise of the floor.",
          [lib.range('gpumem_leak_suspected{%s}' % m.process, legend)],
          lib.valueMappings([[0, 'no', 'green'], [1, 'suspected', 'red']]),
          'green',
          [[1, 'red']],
        ) + lib.at(12, 25, 12, 8),

        lib.timeseries(
          'Allocator retries and OOMs',
          'Allocations the allocator retried after freeing its cache, and out-of-memory errors it raised, per interval.',
          'none',
          [
            lib.range('increase(gpumem_process_alloc_retries_total{%s}[$__rate_interval])' % m.process, '{{comm}} ({{pid}}) retries'),
            lib.range('increase(gpumem_process_ooms_total{%s}[$__rate_interval])' % m.process, '{{comm}} ({{pid}}) OOMs'),
          ],
          drawStyle='bars',
        ) + lib.at(0, 33, 12, 8),
        lib.timeseries('Memory outside the allocator', 'NVML used minus allocator reserved: CUDA context, cuBLAS/cuDNN workspaces, NCCL buffers.', 'bytes', [
          lib.range('gpumem_process_overhead_bytes{%s}' % m.process, legend),
        ]) + lib.at(12, 33, 12, 8),

        lib.timeseries('Model memory by component', 'Parameters, gradients and optimizer state by model component, as reported by report_model(), stacked.', 'bytes', [
          lib.range('gpumem_process_component_bytes{%s}' % m.process, '{{pid}} {{component}} {{kind}}'),
        ], stacked=true) + lib.at(0, 41, 12, 8),
        lib.table('Phase now', 'The phase each process is in now.', 'none', [
          lib.instant('gpumem_process_phase_info{%s}' % m.process),
        ], hide=['Time', '__name__', 'job', 'Value', 'uuid']) + lib.at(12, 41, 12, 8),

        lib.timeseries(
          'Allocated by rank of the training job',
          'Allocated bytes of each rank of the selected training jobs, all nodes, now and as the peak of the last 5 minutes (what the rank imbalance uses: instantaneous values of balanced ranks differ by the step sawtooth).',
          'bytes',
          [
            lib.range('exported_job_rank:gpumem_process_allocated_bytes:sum{%s}' % m.job, '{{exported_job}} rank {{rank}} ({{instance}})'),
            lib.range('exported_job_rank:gpumem_process_allocated_bytes:max5m{%s}' % m.job, '{{exported_job}} rank {{rank}} 5-min peak'),
            lib.range('exported_job:gpumem_process_allocated_peak_bytes:max{%s}' % m.job, '{{exported_job}} peak of any rank'),
          ],
        ) + lib.at(0, 49, 12, 8),
        lib.timeseries(
          'Rank imbalance (max / mean)',
          "Busiest rank over the mean of the job's ranks: 5-minute allocated peaks over all nodes (recorded), and the exporter's ratio on each node.",
          'none',
          [
            lib.range('exported_job:gpumem_process_allocated_bytes:rank_max_over_avg{%s}' % m.job, '{{exported_job}} all ranks'),
            lib.range('gpumem_imbalance_ratio{%s, scope="job", exported_job=~"$job"}' % m.node, '{{exported_job}} on {{instance}}'),
          ],
          steps=[[c.imbalanceRatio, 'orange']],
          min=1,
          thresholdsStyle='line',
        ) + lib.at(12, 49, 12, 8),

        lib.table('Processes of the training job', 'Training identity of each process (gpumem_process_info).', 'none', [
          lib.instant('gpumem_process_info{%s, instance=~"$instance"}' % m.job),
        ], hide=['Time', '__name__', 'job', 'Value', 'uuid']) + lib.at(0, 57, 24, 7),
      ],
      annotations=[{
        name: 'Phase changes',
        datasource: lib.datasource,
        enable: true,
        hide: false,
        iconColor: 'purple',
        // Only phases outside $step_phases: the per-step phases would cover the graphs.
        expr: 'changes(gpumem_process_phase_entries_total{%s, phase!~"$step_phases"}[$__interval]) > 0' % m.process,
        step: '$__interval',
        titleFormat: '{{phase}}',
        textFormat: '{{comm}} ({{pid}}) on GPU {{gpu}} entered {{phase}}',
        tagKeys: 'phase,pid',
        useValueForTime: false,
      }, lib.oomAnnotation(m.process)],
    ),
  },
}
