// Template variables shared by the dashboards, and the label matchers that read them.
local lib = import 'lib.libsonnet';

{
  cluster: lib.queryVariable(
    'cluster',
    'Cluster',
    'label_values(gpumem_gpu_info, cluster)',
    description='Optional `cluster` target label; All also matches series without it.',
  ),
  instance: lib.queryVariable('instance', 'Node', 'label_values(gpumem_gpu_info{cluster=~"$cluster"}, instance)'),
  gpu: lib.queryVariable('gpu', 'GPU', 'label_values(gpumem_gpu_info{cluster=~"$cluster", instance=~"$instance"}, gpu)', sort=3),
  // The training job (`exported_job`), not the scrape job.
  job: lib.queryVariable(
    'job',
    'Training job',
    'label_values(gpumem_process_info{cluster=~"$cluster", instance=~"$instance"}, exported_job)',
    description='Training job reported by the process (`exported_job`; `job` is the scrape job).',
  ),
  // "All" is .+ so that the GPU-level series of the families that also have per-process series
  // (no pid label) stay out.
  pid: lib.queryVariable(
    'pid',
    'Process',
    'label_values(gpumem_process_used_bytes{cluster=~"$cluster", instance=~"$instance", gpu=~"$gpu"}, pid)',
    description='All (.+) selects per-process series only.',
    sort=3,
    allValue='.+',
  ),

  // Matchers, without braces.
  match: {
    cluster: 'cluster=~"$cluster"',
    node: self.cluster + ', instance=~"$instance"',
    gpu: self.node + ', gpu=~"$gpu"',
    process: self.gpu + ', pid=~"$pid"',
    job: self.cluster + ', exported_job=~"$job"',
  },
}
