#!/usr/bin/env bash
# On a GPU node: the ingest trust boundary against real NVML and a real PyTorch process.
#   bash bench/trust_gpu.sh OUTDIR
# A PyTorch training loop reports through the Python client (NVML lists it: its reports must
# count in full), while a process that never touches the GPU sends OOM events and retry
# counters naming that GPU every second (NVML does not list it: they must move nothing at GPU
# level). Writes OUTDIR/trust.json and the exporter's metrics and log.
set -euo pipefail
OUT=${1:-trust-check}
mkdir -p "$OUT"
BIN=${GPUMEM_BIN:-target/release/gpumem-exporter}
SOCK=$(mktemp -d)/ingest.sock
PORT=${PORT:-10051}
"$BIN" --source nvml --sample-interval 1s --web.listen-address 127.0.0.1:$PORT \
  --ingest.socket "$SOCK" 2>"$OUT/exporter.log" &
EXP=$!
trap 'kill $EXP $TRAIN $FORGE 2>/dev/null || true' EXIT
TRAIN= FORGE=
for _ in $(seq 100); do curl -sf localhost:$PORT/-/ready >/dev/null && break; sleep 0.1; done
UUID=$(curl -s localhost:$PORT/metrics | sed -n 's/^gpumem_gpu_info{.*uuid="\([^"]*\)".*/\1/p' | head -1)
echo "GPU $UUID" | tee "$OUT/gpu.txt"

GPUMEM_INGEST_SOCKET=$SOCK PYTHONPATH=clients/python python3 - >"$OUT/trainer.txt" 2>&1 <<'PY' &
import os, time, torch, gpumem_client
gpumem_client.start()
model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(8)]).cuda()
opt = torch.optim.AdamW(model.parameters())
x = torch.randn(256, 4096, device="cuda")
print("trainer pid", os.getpid(), flush=True)
end = time.time() + 40
while time.time() < end:
    opt.zero_grad(set_to_none=True)
    model(x).pow(2).mean().backward()
    opt.step()
    torch.cuda.synchronize()
PY
TRAIN=$!

python3 - "$SOCK" "$UUID" >"$OUT/forger.txt" 2>&1 <<'PY' &
import json, os, socket, sys, time
path, uuid = sys.argv[1], sys.argv[2]
print("forger pid", os.getpid(), flush=True)
for n in range(30):
    body = json.dumps({"version": 1,
        "devices": [{"uuid": uuid, "allocated_bytes": 70 << 30, "reserved_bytes": 79 << 30,
                     "alloc_retries": 5 * n, "ooms": n}],
        "events": [{"kind": "oom", "name": uuid, "message": "forged"}]}).encode()
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.sendall(b"POST /api/v1/report HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    print(s.recv(4096).decode().splitlines()[-1], flush=True)
    s.close()
    time.sleep(1)
PY
FORGE=$!

# Risk sampled every second while both run.
: > "$OUT/risk.txt"
for _ in $(seq 34); do
  curl -s localhost:$PORT/metrics | grep -E '^gpumem_oom_risk_level\{' | grep -v 'pid=' >> "$OUT/risk.txt" || true
  sleep 1
done
curl -s localhost:$PORT/metrics > "$OUT/metrics.txt"
wait $FORGE || true
wait $TRAIN || true

python3 - "$OUT" "$UUID" <<'PY'
import json, re, sys
out, uuid = sys.argv[1], sys.argv[2]
m = open(f"{out}/metrics.txt").read()
trainer = re.search(r"trainer pid (\d+)", open(f"{out}/trainer.txt").read()).group(1)
forger = re.search(r"forger pid (\d+)", open(f"{out}/forger.txt").read()).group(1)
def val(name, pid=None):
    for l in m.splitlines():
        if l.startswith(name + "{") or l.startswith(name + " "):
            if pid is None and "pid=" in l and 'pid=""' not in l:
                continue
            if pid is not None and f'pid="{pid}"' not in l:
                continue
            return float(l.rsplit(" ", 1)[1])
    return None
risks = [float(l.rsplit(" ", 1)[1]) for l in open(f"{out}/risk.txt") if uuid in l]
answers = [l for l in open(f"{out}/forger.txt") if l.startswith("{")]
result = {
    "gpu": uuid,
    "trainer_pid": trainer,
    "trainer_nvml_used_bytes": val("gpumem_process_used_bytes", trainer),
    "trainer_allocated_bytes": val("gpumem_process_allocated_bytes", trainer),
    "trainer_fragmentation_ratio_exported": val("gpumem_fragmentation_ratio", trainer) is not None,
    "forger_pid": forger,
    "forger_answers": len(answers),
    "forger_answers_unlisted": sum('"unlisted"' in a for a in answers),
    "forger_allocated_bytes": val("gpumem_process_allocated_bytes", forger),
    "forger_risk_level": val("gpumem_oom_risk_level", forger),
    "forger_fragmentation_ratio_exported": val("gpumem_fragmentation_ratio", forger) is not None,
    "gpu_risk_levels_seen": sorted(set(risks)),
    "gpu_risk_samples": len(risks),
    "unlisted_total": val("gpumem_ingest_unlisted_total"),
    "reports_total": val("gpumem_ingest_reports_total"),
}
ok = (result["trainer_nvml_used_bytes"] and result["trainer_allocated_bytes"]
      and result["trainer_fragmentation_ratio_exported"]
      and result["forger_answers_unlisted"] == result["forger_answers"] > 0
      and max(risks or [9]) == 0 and not result["forger_fragmentation_ratio_exported"])
result["pass"] = bool(ok)
json.dump(result, open(f"{out}/trust.json", "w"), indent=2)
print(json.dumps(result, indent=2))
PY
