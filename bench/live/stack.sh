# The live stack on a GPU node, sourced by the scripts that record or page live: the exporter on
# NVML (1 s), a webhook receiver that timestamps every notification (firing and resolved), a
# real Alertmanager and a real Prometheus with alerts/ (scrape and evaluation every $SCRAPE).
# Prometheus and Alertmanager come from the Debian packages in $DEBS, unpacked with dpkg -x.
#
#   source bench/live/stack.sh; live_stack OUTDIR     # sets LIVE_PIDS, EXP (exporter pid), SOCK
#
# Needs BIN (the exporter binary), SCRAPE (default 5s); runs from the repository's root.
# NVML_ONLY_PORT=PORT (default unset: none) starts a second exporter on that port with the
# allocator reports off (NVML alone, as on a node without the client), scraped by the same
# Prometheus as the job `gpumem-exporter-nvml` (the first is `gpumem-exporter`): its alerts
# reach the same Alertmanager and webhook, told apart by their `job` and `instance` labels,
# which the route's group_by (instance) keeps in groups of their own. Sets EXP_NVML.

live_stack() {
  local out=$1
  local root
  # A plan that ran without its exporter would be recorded but never watched: stop before it.
  if [ ! -x "${BIN:-target/release/gpumem-exporter}" ]; then
    echo "live_stack: no exporter binary at ${BIN:-target/release/gpumem-exporter} (set BIN)" >&2
    return 1
  fi
  root=$(mktemp -d)
  for f in "${DEBS:-.live}"/*.deb; do dpkg -x "$f" "$root"; done
  # Debian's Alertmanager reads its default notification templates from this fixed path.
  if [ ! -e /usr/share/prometheus/alertmanager/default.tmpl ]; then
    mkdir -p /usr/share/prometheus && cp -r "$root/usr/share/prometheus/alertmanager" /usr/share/prometheus/
  fi
  SOCK=${SOCK:-/tmp/gpumem-live.sock}
  LIVE_PIDS=()
  # Each exporter's per-second reading of every process (its demand's views and their
  # evidence, its leak test) goes to its log beside the pages, so a page the replay of the
  # recording does not reproduce can be explained from what the exporter saw live.
  local log=${LIVE_RUST_LOG:-info,gpumem_exporter::analysis::demand=trace,gpumem_exporter::engine::analyse=trace}
  RUST_LOG=$log "${BIN:-target/release/gpumem-exporter}" --source nvml --sample-interval 1s \
    --web.listen-address 127.0.0.1:10049 --ingest.socket "$SOCK" >"$out/exporter.log" 2>&1 &
  EXP=$!
  LIVE_PIDS+=("$EXP")
  local nvml_job=""
  if [ -n "${NVML_ONLY_PORT:-}" ]; then
    RUST_LOG=$log "${BIN:-target/release/gpumem-exporter}" --source nvml --sample-interval 1s \
      --web.listen-address "127.0.0.1:$NVML_ONLY_PORT" --ingest.socket= >"$out/exporter-nvml.log" 2>&1 &
    EXP_NVML=$!
    LIVE_PIDS+=("$EXP_NVML")
    nvml_job="
  - job_name: gpumem-exporter-nvml
    static_configs:
      - targets: ['127.0.0.1:$NVML_ONLY_PORT']"
  fi
  python3 bench/live/webhook.py 127.0.0.1:9099 "$out/pages.jsonl" &
  LIVE_PIDS+=($!)
  sed "s|WEBHOOK_URL|http://127.0.0.1:9099/|" bench/live/alertmanager.yml >"$root/am.yml"
  "$root/usr/bin/prometheus-alertmanager" --config.file="$root/am.yml" --storage.path="$root/am" \
    --web.listen-address=127.0.0.1:9093 --cluster.listen-address= >"$out/alertmanager.log" 2>&1 &
  LIVE_PIDS+=($!)
  cat >"$root/prom.yml" <<EOC
global:
  scrape_interval: ${SCRAPE:-5s}
  evaluation_interval: ${SCRAPE:-5s}
rule_files:
  - $PWD/alerts/gpumem-rules.yaml
  - $PWD/alerts/gpumem-alerts.yaml
alerting:
  alertmanagers:
    - static_configs:
        - targets: ['127.0.0.1:9093']
scrape_configs:
  - job_name: gpumem-exporter
    static_configs:
      - targets: ['127.0.0.1:10049']$nvml_job
EOC
  "$root/usr/bin/prometheus" --config.file="$root/prom.yml" --storage.tsdb.path="$root/prom" \
    --web.listen-address=127.0.0.1:9090 >"$out/prometheus.log" 2>&1 &
  LIVE_PIDS+=($!)
  export GPUMEM_SOCKET=$SOCK
}

# Every notification that reached the receiver, and what Prometheus held at the end.
live_collect() {
  local out=$1
  curl -s "127.0.0.1:9090/api/v1/query?query=ALERTS" >"$out/alerts.json" || true
  curl -s 127.0.0.1:10049/metrics | grep -E '^gpumem_exporter|^process_' >"$out/exporter-self.txt" || true
  if [ -n "${NVML_ONLY_PORT:-}" ]; then
    curl -s "127.0.0.1:$NVML_ONLY_PORT/metrics" | grep -E '^gpumem_exporter|^process_' >"$out/exporter-nvml-self.txt" || true
  fi
}
