// Training jobs across nodes: per-rank and per-job memory, rank imbalance, the bottleneck rank.
// The training identity (exported_job, rank) comes from gpumem_process_info, one series per
// process and GPU, joined on the process's node, GPU and pid.
{
  prometheusRules+:: {
    groups+: [
      {
        name: 'gpumem.recording.jobs',
        rules: [
          {
            comments:: { above: |||
              Allocated bytes of each rank of each training job, across all nodes. The training
              identity comes from gpumem_process_info (one series per process and GPU), joined on the
              process's node, GPU and pid. Processes that reported no job are left out.
            ||| },
            record: 'exported_job_rank:gpumem_process_allocated_bytes:sum',
            expr: |||
              sum by (cluster, exported_job, rank, instance) (
                gpumem_process_allocated_bytes
                * on (instance, gpu, pid) group_left (exported_job, rank)
                  gpumem_process_info{exported_job!=""}
              )
            |||,
          },
          {
            comments:: { above: |||
              The same per rank, as the peak of the last 5 minutes. Training memory is a sawtooth
              (allocated swings by gigabytes within each step) and ranks report at different
              moments, so instantaneous values of perfectly balanced ranks differ by up to the swing:
              with 8 ranks the max almost always catches a peak while the mean sits mid-swing. Each
              rank's 5-minute peak is steady and is also what runs out of memory. The join with the
              instant gpumem_process_info drops a process as soon as it has gone.
            ||| },
            record: 'exported_job_rank:gpumem_process_allocated_bytes:max5m',
            expr: |||
              sum by (cluster, exported_job, rank, instance) (
                max_over_time(gpumem_process_allocated_bytes[5m])
                * on (instance, gpu, pid) group_left (exported_job, rank)
                  gpumem_process_info{exported_job!=""}
              )
            |||,
          },
          {
            comments:: { above: |||
              Rank imbalance of a job: max / mean over its ranks' 5-minute peaks, only for jobs with
              2 ranks or more.
            ||| },
            record: 'exported_job:gpumem_process_allocated_bytes:rank_max_over_avg',
            expr: |||
              (
                max by (cluster, exported_job) (exported_job_rank:gpumem_process_allocated_bytes:max5m)
                / (avg by (cluster, exported_job) (exported_job_rank:gpumem_process_allocated_bytes:max5m) > 0)
              )
              and on (cluster, exported_job)
                (count by (cluster, exported_job) (exported_job_rank:gpumem_process_allocated_bytes:max5m) > 1)
            |||,
          },
          {
            comments:: { above: 'The bottleneck rank of each job (value: its 5-minute peak; labels: rank, instance).' },
            record: 'exported_job:gpumem_process_allocated_bytes:rank_top1',
            expr: 'topk by (cluster, exported_job) (1, exported_job_rank:gpumem_process_allocated_bytes:max5m)',
          },
          {
            section:: true,
            comments:: { above: 'Job totals: live tensors (allocator view) and what the driver sees (NVML view).' },
            record: 'exported_job:gpumem_process_allocated_bytes:sum',
            expr: 'sum by (cluster, exported_job) (exported_job_rank:gpumem_process_allocated_bytes:sum)',
          },
          {
            record: 'exported_job_instance:gpumem_process_used_bytes:sum',
            expr: |||
              sum by (cluster, exported_job, instance) (
                gpumem_process_used_bytes
                * on (instance, gpu, pid) group_left (exported_job)
                  gpumem_process_info{exported_job!=""}
              )
            |||,
          },
          {
            record: 'exported_job:gpumem_process_used_bytes:sum',
            expr: 'sum by (cluster, exported_job) (exported_job_instance:gpumem_process_used_bytes:sum)',
          },
          {
            comments:: { above: |||
              Per-job peak: the highest allocator peak of any of its ranks. This is the number that
              decides whether the job fits on a GPU (every rank needs at least this much).
            ||| },
            record: 'exported_job:gpumem_process_allocated_peak_bytes:max',
            expr: |||
              max by (cluster, exported_job) (
                gpumem_process_allocated_peak_bytes
                * on (instance, gpu, pid) group_left (exported_job)
                  gpumem_process_info{exported_job!=""}
              )
            |||,
          },
        ],
      },
    ],
  },
}
