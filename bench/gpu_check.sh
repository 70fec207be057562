#!/usr/bin/env bash
# On a GPU node, in one go: the NVML readings against nvidia-smi and the sampling cost against
# the NVML floor (bench/nvml_overhead.sh), then the Python client in a real PyTorch training
# process reporting to the release binary on NVML: what the exporter serves for that process
# against torch.cuda.memory_stats() in the same process, and the client's overhead.
#   bash bench/gpu_check.sh OUTDIR
set -euo pipefail
OUT=${1:-gpu-check}
mkdir -p "$OUT"
BIN=${GPUMEM_BIN:-target/release/gpumem-exporter}
nvidia-smi -L > "$OUT/gpus.txt"
SECONDS_PER_RUN=${SECONDS_PER_RUN:-15} bash bench/nvml_overhead.sh "$OUT/nvml" 2>&1 | tee "$OUT/nvml.txt"

SOCK=/tmp/gpumem-check.sock
PORT=10049
"$BIN" --source nvml --sample-interval 500ms --web.listen-address 127.0.0.1:$PORT --ingest.socket $SOCK 2>"$OUT/exporter.log" &
EXP=$!
trap 'kill $EXP 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf localhost:$PORT/-/ready >/dev/null && break; sleep 0.1; done
PYTHONUNBUFFERED=1 python3 clients/python/bench_overhead.py --exporter-socket $SOCK \
  --rounds 3 --steps 150 --hold 12 > "$OUT/client.txt" 2>&1 &
BENCH=$!
for _ in $(seq 600); do grep -q '^MEMORY ' "$OUT/client.txt" 2>/dev/null && break; sleep 0.5; done
sleep 4
curl -s localhost:$PORT/metrics > "$OUT/client-metrics.txt"
wait $BENCH || true
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
line = [l for l in open(f"{out}/client.txt") if l.startswith("MEMORY ")][0]
want = json.loads(line[len("MEMORY "):])
m = open(f"{out}/client-metrics.txt").read()
def val(name):
    for l in m.splitlines():
        if l.startswith(name + "{") and f'pid="{want["pid"]}"' in l and f'uuid="{want["device_uuid"]}"' in l:
            return float(l.rsplit(" ", 1)[1]), l
    return None, None
print("process pid", want["pid"], "device", want["device_uuid"], "exporter saw pid", want["exporter_pid"])
for name, key in [("gpumem_process_allocated_bytes", "allocated_bytes"), ("gpumem_process_reserved_bytes", "reserved_bytes")]:
    v, _ = val(name)
    print(f"{name}: exporter {v} torch {want[key]} match {v == want[key]}")
for name in ["gpumem_process_used_bytes", "gpumem_process_overhead_bytes", "gpumem_fragmentation_ratio",
             "gpumem_cached_unallocated_ratio", "gpumem_process_largest_free_block_bytes", "gpumem_process_component_bytes"]:
    v, l = val(name)
    print(name, v)
PY
grep -E "^(setting|no client|interval|\(median)" "$OUT/client.txt" || true
grep -E "_us" "$OUT/client.txt" || true
