// Every knob of the mixin. Override any of them with
//   (import 'mixin.libsonnet') + { _config+:: { ... } }
// The defaults render exactly the files shipped in alerts/ and grafana/.
{
  _config+:: {
    // --- selectors ---------------------------------------------------------------------------

    // The exporter's scrape job. Only GpuMemExporterDown reads `up` and needs it; every other
    // rule reads metric families that only this exporter exposes, so they need no selector.
    gpumemSelector: 'job=~".*gpumem.*"',

    // --- OOM risk (the exporter's own levels: 0 low, 1 medium, 2 high, 3 critical) ----------
    // The forecast thresholds behind the levels live in the exporter's configuration
    // (`analysis.risk.*`), not here: these only pick which level pages and which warns.
    // The OOM alerts' own evaluation interval, whatever Prometheus's global one (often 30 s or
    // the default 1 m): a critical level is seen at the next scrape, and then at most this much
    // later by the rule, instead of up to a whole global interval (docs/alerts.md, the delay
    // budget). The expressions read a few series per GPU: 5 s costs nothing. null: the global
    // evaluation interval.
    oomAlertsInterval: '5s',
    oomImminentRiskLevel: 3,
    // null: no `for`. At a 15 s scrape and evaluation the page already waits up to 30 s, and
    // a critical forecast leaves about a minute (docs/alerts.md, the delay budget).
    oomImminentFor: null,
    // No `keep_firing_for`: the exporter holds a critical level across a staircase's gaps (a
    // batch-size warm-up, a cache grown segment by segment) while the process that drove it
    // lives, and drops it when that process exits, so the page holds to the crash and resolves
    // at the next evaluation after it (docs/alerts.md, one page per incident). A duration here
    // would bridge one job's page into the next job's incident on the same GPU.
    oomImminentKeepFiringFor: null,
    oomRiskHighRiskLevel: 2,
    oomRiskHighFor: '30s',
    oomRiskHighKeepFiringFor: null,
    // The windows of the forecast's score (precision and recall of the page, recorded per
    // cluster): a week follows a change, a month has enough OOMs to mean something.
    forecastScoreWindows: ['7d', '30d'],
    // Tight but steady headroom (gpumem_headroom_tight): a ticket for the owners, never a page.
    headroomTightFor: '15m',

    // --- leaks -------------------------------------------------------------------------------
    // The exporter decides what is a leak (gpumem_leak_suspected). A minimum slope here drops
    // the slow ones from the alert; 0 alerts on every leak the exporter suspects.
    leakAlertMinSlopeBytesPerMinute: 0,
    leakFor: '5m',
    // The dashboard's threshold line on the leak slope (the exporter's default leak threshold).
    leakSlopeWarningBytesPerMinute: 10 * 1024 * 1024,

    // --- fragmentation (share of the free cache that cannot serve a large request) ----------
    // Seed bands: < moderate good, < serious moderate, < severe serious, >= severe severe.
    fragmentationModerateRatio: 0.15,
    fragmentationSeriousRatio: 0.30,  // warning alert
    fragmentationSevereRatio: 0.40,  // critical alert
    fragmentationWindow: '5m',
    // Fragmentation of a small cache cannot starve a large request.
    fragmentationMinReservedBytes: 1024 * 1024 * 1024,
    fragmentationFor: '10m',

    // --- allocator retries -------------------------------------------------------------------
    allocRetriesThreshold: 5,
    allocRetriesWindow: '5m',
    allocRetriesFor: '5m',

    // --- imbalance (max / mean of GPUs of a node, nodes of a cluster, ranks of a job) -------
    imbalanceRatio: 1.5,
    // GPU and node imbalance only counts while the fullest is above this share of its memory.
    imbalanceMinUsedRatio: 0.75,
    // Rank imbalance only counts while the busiest rank holds more than this.
    imbalanceRankMinBytes: 1024 * 1024 * 1024,
    imbalanceFor: '15m',

    // --- availability ------------------------------------------------------------------------
    exporterDownFor: '2m',
    deviceDownFor: '1m',
    ingestDownFor: '5m',

    // --- memory no process accounts for (gpumem_unattributed_bytes) -------------------------
    // Large: over this many bytes and this share of the GPU. Persistent: for this long (a
    // process that is starting or exiting holds memory NVML lists a moment later or earlier).
    unattributedMinBytes: 2 * 1024 * 1024 * 1024,
    unattributedMinRatio: 0.05,
    unattributedFor: '15m',

    runbookURLPattern: 'https://github.com/gpumem-exporter/gpumem-exporter/blob/main/docs/runbooks/%s.md',

    // --- dashboards --------------------------------------------------------------------------
    // Stable uids: links and bookmarks survive re-imports. The shipped files are named after
    // them (grafana/<uid>.json).
    dashboardUids: {
      cluster: 'gpumem-cluster',
      node: 'gpumem-node',
      process: 'gpumem-process',
    },
    dashboardTitlePrefix: 'GPU memory / ',
    dashboardTags: ['gpumem', 'gpu', 'memory'],
    // The dashboards link to every dashboard carrying these tags.
    dashboardLinkTags: ['gpumem'],
    dashboardRefresh: '30s',
    dashboardTimeFrom: 'now-1h',
    dashboardTimezone: '',
    // Share of a GPU's memory in use: the band where a person should look before the forecast pages.
    usedRatioWarning: 0.75,
    usedRatioCritical: 0.85,
    // Regex of phases entered on every training step: not drawn as phase-change annotations.
    stepPhases: 'forward|backward|optimizer|step',
  },
}
