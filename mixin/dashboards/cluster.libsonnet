// Cluster overview: memory by node and training job, imbalance, the GPUs most at risk,
// bottleneck nodes and ranks, firing alerts.
local u = import '../lib/utils.libsonnet';
local lib = import 'lib.libsonnet';
local vars = import 'variables.libsonnet';
local m = vars.match;

{
  grafanaDashboards+:: {
    local c = $._config,
    local usedBand = [[c.usedRatioWarning, 'orange'], [c.usedRatioCritical, 'red']],
    local imbalanceSteps = [[c.imbalanceRatio, 'orange']],

    'gpumem-cluster.json': lib.dashboard(
      c,
      c.dashboardUids.cluster,
      'Cluster overview',
      'GPU memory of the whole cluster: use by node and training job, imbalance, the GPUs most at risk of running out, bottleneck nodes and firing gpumem alerts.',
      [vars.cluster, vars.instance, vars.gpu, vars.job],
      [
        lib.stat('Memory used', 'NVML `used` of all GPUs (cluster:gpumem_used_bytes:sum).', 'bytes', [
          lib.range('sum(cluster:gpumem_used_bytes:sum{%s})' % m.cluster),
        ]) + lib.at(0, 0, 4, 4),
        lib.stat('Memory free', 'NVML `free` of all GPUs.', 'bytes', [
          lib.range('sum(cluster:gpumem_free_bytes:sum{%s})' % m.cluster),
        ]) + lib.at(4, 0, 4, 4),
        lib.stat('Memory installed', 'Installed memory of all GPUs.', 'bytes', [
          lib.range('sum(cluster:gpumem_total_bytes:sum{%s})' % m.cluster),
        ]) + lib.at(8, 0, 4, 4),
        lib.gauge(
          'Share used',
          'Used / installed over the cluster. Seed OOM warning band: %s-%s %%.' % [u.percent(c.usedRatioWarning), u.percent(c.usedRatioCritical)],
          [lib.range('sum(cluster:gpumem_used_bytes:sum{%s}) / sum(cluster:gpumem_total_bytes:sum{%s})' % [m.cluster, m.cluster])],
          usedBand,
        ) + lib.at(12, 0, 4, 4),
        lib.stat('GPUs at high or critical risk', 'GPUs whose OOM risk level is high (2) or critical (3).', 'none', [
          lib.range('count(gpumem_oom_risk_level{%s, pid=""} >= 2) or vector(0)' % m.node),
        ], [[1, 'orange']]) + lib.at(16, 0, 4, 4),
        lib.stat('GPUs down', 'GPUs the exporter failed to sample (gpumem_device_up == 0).', 'none', [
          lib.range('count(gpumem_device_up{%s} == 0) or vector(0)' % m.node),
        ], [[1, 'red']]) + lib.at(20, 0, 4, 4),

        lib.timeseries('Memory used by node', "Sum of NVML `used` over each node's GPUs, stacked.", 'bytes', [
          lib.range('instance:gpumem_used_bytes:sum{%s}' % m.node, '{{instance}}'),
        ], stacked=true) + lib.at(0, 4, 12, 8),
        lib.timeseries(
          'Memory used by training job',
          'NVML memory of the processes of each training job (`exported_job`), all nodes, stacked. Processes that report no job are not counted here.',
          'bytes',
          [lib.range('exported_job:gpumem_process_used_bytes:sum{%s}' % m.job, '{{exported_job}}')],
          stacked=true,
        ) + lib.at(12, 4, 12, 8),
        lib.timeseries('Memory used by job and node', "Each training job's NVML memory on each node.", 'bytes', [
          lib.range('exported_job_instance:gpumem_process_used_bytes:sum{%s, instance=~"$instance"}' % m.job, '{{exported_job}} on {{instance}}'),
        ]) + lib.at(0, 12, 12, 8),
        lib.timeseries(
          'Share of memory used by GPU',
          "Used / installed of each GPU; the %s %% and %s %% lines are the warning band." % [u.percent(c.usedRatioWarning), u.percent(c.usedRatioCritical)],
          'percentunit',
          [lib.range('instance_gpu:gpumem_used:ratio{%s}' % m.gpu, '{{instance}} GPU {{gpu}}')],
          steps=usedBand,
          max=1,
          thresholdsStyle='line',
        ) + lib.at(12, 12, 12, 8),

        lib.timeseries(
          'Imbalance (max / mean)',
          "Cross-node: the fullest node over the mean of the nodes. Per node: the fullest GPU over the node's mean (exporter). GpuMemoryImbalance warns above %s for %s when the fullest is above %s %% of its memory." % [u.num(c.imbalanceRatio), u.duration(c.imbalanceFor), u.percent(c.imbalanceMinUsedRatio)],
          'none',
          [
            lib.range('cluster:gpumem_used_bytes:node_max_over_avg{%s}' % m.cluster, 'across nodes'),
            lib.range('gpumem_imbalance_ratio{%s, scope="node"}' % m.node, 'GPUs of {{instance}}'),
          ],
          steps=imbalanceSteps,
          min=1,
          thresholdsStyle='line',
        ) + lib.at(0, 20, 12, 8),
        lib.timeseries(
          'Rank imbalance by training job (max / mean)',
          "5-minute allocated peak of the job's busiest rank over the mean of its ranks, all nodes (recorded), and the exporter's ratio over the ranks on one node.",
          'none',
          [
            lib.range('exported_job:gpumem_process_allocated_bytes:rank_max_over_avg{%s}' % m.job, '{{exported_job}} all ranks'),
            lib.range('gpumem_imbalance_ratio{%s, scope="job", exported_job=~"$job"}' % m.node, '{{exported_job}} on {{instance}}'),
          ],
          steps=imbalanceSteps,
          min=1,
          thresholdsStyle='line',
        ) + lib.at(12, 20, 12, 8),

        lib.table(
          'GPUs most at risk',
          'The 10 GPUs with the highest OOM risk level now, with the reason.',
          'none',
          [lib.instant('topk(10, gpumem_oom_risk_info{%s} * on (instance, gpu) group_left gpumem_oom_risk_level{%s, pid=""})' % [m.node, m.node])],
          hide=['Time', '__name__', 'job', 'uuid', 'level'],
          rename={ Value: 'risk level' },
          steps=lib.riskSteps,
          mappings=lib.valueMappings(lib.riskLevels),
          cellType='color-background',
        ) + lib.at(0, 28, 8, 8),
        lib.table(
          'Soonest predicted OOM',
          'The GPUs with the shortest predicted time to OOM. Empty while no GPU is on course to run out.',
          's',
          [lib.instant('bottomk(10, gpumem_oom_eta_seconds{%s, pid=""})' % m.node)],
          hide=['Time', '__name__', 'job'],
          rename={ Value: 'predicted OOM in' },
          base='red',
          steps=[[60, 'orange'], [600, 'green']],
          cellType='color-background',
        ) + lib.at(8, 28, 8, 8),
        lib.bargauge('Fullest GPUs', 'The 10 GPUs with the highest share of memory used.', [
          lib.instant('topk(10, instance_gpu:gpumem_used:ratio{%s})' % m.node, '{{instance}} GPU {{gpu}}', table=false),
        ], usedBand) + lib.at(16, 28, 8, 8),

        lib.table(
          'Bottleneck nodes',
          'Per cluster, the node that holds the most GPU memory, and per node, its fullest GPU.',
          'bytes',
          [
            lib.instant('cluster:gpumem_used_bytes:node_top1{%s}' % m.cluster),
            lib.instant('instance:gpumem_used_bytes:gpu_top1{%s}' % m.node),
          ],
          merge=true,
          hide=['Time', '__name__', 'job', 'uuid'],
          rename={ 'Value #A': 'node used', 'Value #B': 'fullest GPU used' },
        ) + lib.at(0, 36, 8, 8),
        lib.table(
          'Bottleneck ranks',
          'Per training job, the rank with the highest 5-minute peak of allocated memory.',
          'bytes',
          [lib.instant('exported_job:gpumem_process_allocated_bytes:rank_top1{%s}' % m.job)],
          hide=['Time', '__name__'],
          rename={ Value: 'allocated, 5-min peak' },
        ) + lib.at(8, 36, 8, 8),
        lib.table(
          'Firing gpumem alerts',
          'Alerts of the gpumem rules (GpuMemory*, GpuMemExporterDown, GpuMemDeviceDown) firing now.',
          'none',
          [lib.instant('ALERTS{alertname=~"GpuMem.*", alertstate="firing", %s}' % m.cluster)],
          hide=['Time', '__name__', 'Value', 'alertstate'],
        ) + lib.at(16, 36, 8, 8),

        lib.timeseries(
          "The page's score",
          "From the cluster's own jobs (recorded rules of gpumem.recording.forecast): recall, the share of out-of-memory errors the page came before (reported by a client; inferred ones apart); warning recall, those the page or the high-risk warning came before; precision, the share of pages an out-of-memory error followed (a page none followed may be a false alarm or a job someone stopped in time). Over %s." % std.join(' and ', c.forecastScoreWindows),
          'percentunit',
          std.flattenArrays([
            [
              lib.range('cluster_kind:gpumem_forecast_page_recall:ratio%s{%s}' % [w, m.cluster], '{{kind}} recall %s' % w),
              lib.range('cluster_kind:gpumem_forecast_warning_recall:ratio%s{%s}' % [w, m.cluster], '{{kind}} warning recall %s' % w),
              lib.range('cluster:gpumem_forecast_page_precision:ratio%s{%s}' % [w, m.cluster], 'precision %s' % w),
            ]
            for w in c.forecastScoreWindows
          ]),
          max=1,
        ) + lib.at(0, 44, 12, 8),
        lib.table(
          'Out-of-memory errors and the forecast',
          "Over the time range, per node: out-of-memory errors by kind and by what the GPU showed when they came (paged, warned, missed), and the mean lead of the pages (recorded over %s)." % c.forecastScoreWindows[std.length(c.forecastScoreWindows) - 1],
          'none',
          [
            lib.instant('sum by (instance, kind, outcome) (increase(gpumem_forecast_ooms_total{%s}[$__range]))' % m.node),
            lib.instant('cluster_kind:gpumem_forecast_page_lead_seconds:mean%s{%s}' % [c.forecastScoreWindows[std.length(c.forecastScoreWindows) - 1], m.cluster]),
          ],
          hide=['Time', '__name__'],
          rename={ 'Value #A': 'OOMs', 'Value #B': 'mean page lead (s)' },
        ) + lib.at(12, 44, 12, 8),
      ],
    ),
  },
}
