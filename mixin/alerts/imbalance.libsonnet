// One GPU of a node, one node of the cluster or one rank of a training job holds far more than
// its peers. Reads the recorded series of rules/.
local u = import '../lib/utils.libsonnet';

{
  prometheusAlerts+:: {
    local c = $._config,
    local ratio = u.num(c.imbalanceRatio),
    local minUsed = u.num(c.imbalanceMinUsedRatio, 2),
    local minUsedPercent = u.percent(c.imbalanceMinUsedRatio),

    groups+: [
      {
        name: 'gpumem.alerts.imbalance',
        rules: [
          {
            comments:: {
              above: |||
                Imbalance: one GPU of a node, one node of the cluster, or one rank of a training job
                holds far more than its peers (max / mean > 1.5). Data-parallel ranks normally differ by
                10-20 %, rank 0 by up to ~30 % (metrics, checkpoint staging); 1.5 is beyond both. The
                busiest one runs out first while the others have room, so the whole job is limited by
                it. 15 minutes: ranks and nodes start at different times and load at different speeds;
                a real imbalance lasts for the whole run.
              |||,
              expr: |||
                GPUs of one node (the exporter's ratio), only when the fullest GPU is above 75 % of
                its memory: a node that runs unrelated small jobs is uneven without any harm.
              |||,
            },
            alert: 'GpuMemoryImbalance',
            expr: |||
              (
                max by (cluster, instance) (gpumem_imbalance_ratio{scope="node"})
                * on (cluster, instance)
                  (instance:gpumem_used:max_ratio > bool %s)
              ) > %s
            ||| % [minUsed, ratio],
            [if c.imbalanceFor != null then 'for']: c.imbalanceFor,
            labels: { severity: 'warning', imbalance: 'gpus_of_node' },
            annotations: {
              summary: 'One GPU of {{ $labels.instance }} holds far more memory than the others.',
              runbook_url: c.runbookURLPattern % 'GpuMemoryImbalance',
            } + u.description([
              'The fullest GPU of {{ $labels.instance }}{{ with printf `instance:gpumem_used_bytes:gpu_top1{instance=%q}` $labels.instance | query }} (GPU {{ . | first | label "gpu" }}, {{ . | first | value | humanize1024 }}B){{ end }}',
              "uses {{ $value | printf \"%.2f\" }}x the node's mean and is above " + minUsedPercent + ' % of its memory: it runs out first while the other GPUs have room.',
            ]),
          },
          {
            comments:: { expr: |||
              Nodes of the cluster, the bottleneck node named by `instance`; only when that node is
              above 75 % of its memory, for the same reason.
            ||| },
            alert: 'GpuMemoryImbalance',
            expr: |||
              (
                cluster:gpumem_used_bytes:node_max_over_avg
                * on (cluster) group_left (instance)
                  (cluster:gpumem_used_bytes:node_top1 / instance:gpumem_total_bytes:sum > bool %s)
              ) > %s
            ||| % [minUsed, ratio],
            [if c.imbalanceFor != null then 'for']: c.imbalanceFor,
            labels: { severity: 'warning', imbalance: 'nodes' },
            annotations: {
              summary: 'Node {{ $labels.instance }} holds far more GPU memory than the other nodes.',
              runbook_url: c.runbookURLPattern % 'GpuMemoryImbalance',
            } + u.description([
              'Node {{ $labels.instance }} is the bottleneck node{{ with $labels.cluster }} of cluster {{ . }}{{ end }}: it uses {{ $value | printf "%.2f" }}x the mean GPU memory of the nodes',
              'and is above ' + minUsedPercent + ' % of its own memory.',
            ]),
          },
          {
            comments:: { expr: |||
              Ranks of one training job across all nodes (each rank's 5-minute peak of allocated
              bytes, so that the sawtooth of the steps does not count), the bottleneck rank named by
              `rank` and `instance`; only when that rank holds more than 1 GiB (the tiny allocations
              of start-up are uneven by nature).
            ||| },
            alert: 'GpuMemoryImbalance',
            expr: |||
              (
                exported_job:gpumem_process_allocated_bytes:rank_max_over_avg
                * on (cluster, exported_job) group_left (rank, instance)
                  (exported_job:gpumem_process_allocated_bytes:rank_top1 > bool %s)
              ) > %s
            ||| % [u.num(c.imbalanceRankMinBytes), ratio],
            [if c.imbalanceFor != null then 'for']: c.imbalanceFor,
            labels: { severity: 'warning', imbalance: 'ranks_of_job' },
            annotations: {
              summary: 'Rank {{ $labels.rank }} of job {{ $labels.exported_job }} holds far more GPU memory than the other ranks.',
              runbook_url: c.runbookURLPattern % 'GpuMemoryImbalance',
            } + u.description([
              'Rank {{ $labels.rank }} of training job {{ $labels.exported_job }} (on {{ $labels.instance }}) holds',
              "{{ $value | printf \"%.2f\" }}x the mean allocated memory of the job's ranks (5-minute peaks); the job runs out of memory on that rank first.",
            ]),
          },
        ],
      },
    ],
  },
}
