// The forecast's score on the fleet's own jobs: how many out-of-memory errors the page came
// before (recall) and how many pages an out-of-memory error followed (precision), from the
// exporter's counters (docs/alerts.md, keeping score).
//
// Two steps, so that a month's window stays cheap: each rule evaluation adds up the last hour
// of the counters per cluster (a few series), and the windows average those hourly sums. The
// hour cancels in every ratio.
{
  prometheusRules+:: {
    local c = $._config,
    local hourly(metric, by) = |||
      sum by (%(by)s) (increase(%(metric)s[1h]))
    ||| % { metric: metric, by: by },
    local ooms = 'cluster_kind_outcome:gpumem_forecast_ooms:increase1h',
    local leads = 'cluster_kind_outcome:gpumem_forecast_lead_seconds:increase1h',
    local episodes = 'cluster_outcome:gpumem_forecast_critical_episodes:increase1h',
    // The share of `part` in `whole` over `window`, per `by`; absent while `whole` is 0.
    local share(part, whole, window, by) = |||
      sum by (%(by)s) (avg_over_time(%(part)s[%(window)s]))
      /
      (sum by (%(by)s) (avg_over_time(%(whole)s[%(window)s])) > 0)
    ||| % { part: part, whole: whole, window: window, by: by },

    groups+: [
      {
        name: 'gpumem.recording.forecast',
        rules: [
          {
            comments:: { above: |||
              Out-of-memory errors of the last hour per cluster, by kind (reported by a client,
              inferred from a process that vanished from a full GPU) and by what the GPU showed when
              they came (paged: critical; warned: high; missed).
            ||| },
            record: ooms,
            expr: hourly('gpumem_forecast_ooms_total', 'cluster, kind, outcome'),
          },
          {
            comments:: { above: 'Their leads (seconds at critical for paged, at high for warned), summed.' },
            record: leads,
            expr: hourly('gpumem_forecast_lead_seconds_total', 'cluster, kind, outcome'),
          },
          {
            comments:: { above: 'Critical episodes (one per page) that ended in the last hour, by what followed: an OOM or none.' },
            record: episodes,
            expr: hourly('gpumem_forecast_critical_episodes_total', 'cluster, outcome'),
          },
        ] + std.flattenArrays([
          [
            {
              section:: true,
              comments:: { above: |||
                Over %(w)s: recall of the page, the share of out-of-memory errors it came before, and of
                the warning (page or high risk), per kind of OOM.
              ||| % { w: w } },
              record: 'cluster_kind:gpumem_forecast_page_recall:ratio' + w,
              expr: share('%s{outcome="paged"}' % ooms, ooms, w, 'cluster, kind'),
            },
            {
              record: 'cluster_kind:gpumem_forecast_warning_recall:ratio' + w,
              expr: share('%s{outcome=~"paged|warned"}' % ooms, ooms, w, 'cluster, kind'),
            },
            {
              comments:: { above: |||
                Precision of the page over %(w)s: the share of critical episodes an out-of-memory error
                followed. An episode no OOM followed may be a false alarm or a job someone stopped in time.
              ||| % { w: w } },
              record: 'cluster:gpumem_forecast_page_precision:ratio' + w,
              expr: share('%s{outcome="oom"}' % episodes, episodes, w, 'cluster'),
            },
            {
              comments:: { above: 'The mean lead of the pages that came before an OOM over %s, seconds.' % w },
              record: 'cluster_kind:gpumem_forecast_page_lead_seconds:mean' + w,
              expr: share('%s{outcome="paged"}' % leads, '%s{outcome="paged"}' % ooms, w, 'cluster, kind'),
            },
          ]
          for w in c.forecastScoreWindows
        ]),
      },
    ],
  },
}
