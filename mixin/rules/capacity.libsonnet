// Capacity of GPUs, nodes and clusters, and cross-node imbalance.
//
// Hidden fields on a rule only shape the rendered file: `comments` are printed above the rule
// (`above`) or above one of its fields, `section` puts a blank line before it.
{
  prometheusRules+:: {
    groups+: [
      {
        name: 'gpumem.recording.capacity',
        rules: [
          {
            comments:: { above: "Share of each GPU's installed memory in use (NVML `used`, driver reservation excluded)." },
            record: 'instance_gpu:gpumem_used:ratio',
            expr: 'gpumem_used_bytes / gpumem_total_bytes',
          },
          {
            section:: true,
            comments:: { above: 'Per node.' },
            record: 'instance:gpumem_used_bytes:sum',
            expr: 'sum by (cluster, instance) (gpumem_used_bytes)',
          },
          {
            record: 'instance:gpumem_free_bytes:sum',
            expr: 'sum by (cluster, instance) (gpumem_free_bytes)',
          },
          {
            record: 'instance:gpumem_total_bytes:sum',
            expr: 'sum by (cluster, instance) (gpumem_total_bytes)',
          },
          {
            comments:: { above: 'The fullest GPU of each node: its share of memory in use ...' },
            record: 'instance:gpumem_used:max_ratio',
            expr: 'max by (cluster, instance) (instance_gpu:gpumem_used:ratio)',
          },
          {
            comments:: { above: '... and which GPU it is (value: its used bytes; labels: gpu, uuid).' },
            record: 'instance:gpumem_used_bytes:gpu_top1',
            expr: 'topk by (cluster, instance) (1, gpumem_used_bytes)',
          },
          {
            section:: true,
            comments:: { above: 'Whole cluster (or the whole Prometheus when there is no `cluster` label).' },
            record: 'cluster:gpumem_used_bytes:sum',
            expr: 'sum by (cluster) (gpumem_used_bytes)',
          },
          {
            record: 'cluster:gpumem_free_bytes:sum',
            expr: 'sum by (cluster) (gpumem_free_bytes)',
          },
          {
            record: 'cluster:gpumem_total_bytes:sum',
            expr: 'sum by (cluster) (gpumem_total_bytes)',
          },
          {
            record: 'cluster:gpumem_used:ratio',
            expr: 'cluster:gpumem_used_bytes:sum / cluster:gpumem_total_bytes:sum',
          },
          {
            section:: true,
            comments:: { above: |||
              Cross-node imbalance: max / mean of the nodes' used bytes (1 = perfectly even).
              Nodes using nothing at all make the mean 0: no ratio then, rather than +Inf.
            ||| },
            record: 'cluster:gpumem_used_bytes:node_max_over_avg',
            expr: |||
              max by (cluster) (instance:gpumem_used_bytes:sum)
              / (avg by (cluster) (instance:gpumem_used_bytes:sum) > 0)
            |||,
          },
          {
            comments:: { above: 'The bottleneck node: the one holding the most (value: its used bytes; label: instance).' },
            record: 'cluster:gpumem_used_bytes:node_top1',
            expr: 'topk by (cluster) (1, instance:gpumem_used_bytes:sum)',
          },
        ],
      },
    ],
  },
}
