#!/usr/bin/env python3
"""Forty local processes flood the ingest socket while Prometheus-style scrapes go on.

    cargo build --release
    python3 bench/ingest_flood.py [--bin target/release/gpumem-exporter] [--procs 40] [--seconds 30]

The exporter runs on the simulator (2 GPUs of 16 steady processes each, NVML-listed). Each
flooding process, none of which NVML lists, does all of what a hostile or broken local user
can: sends valid reports for the host's GPUs as fast as it can (rate limit), forged OOM events
and retry counters for them (trust boundary), reports naming GPUs the host lacks (refused),
garbage, and holds idle connections (connection limits). The main process scrapes /metrics
every 100 ms and times each scrape.

Printed (JSON): scrape latencies (median, p99, max), answers by status, whether every
NVML-listed process stayed visible, the highest GPU risk level seen during the flood (the
simulated GPUs are at no risk, so anything above 0 is a forged page), the exporter's rejection
counters and its resident memory. Results are recorded in bench/RESULTS.md.
"""

import argparse
import json
import multiprocessing as mp
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

CONFIG = """sim:
  gpus:
    - scenario: processes
      processes: 16
    - scenario: processes
      processes: 16
"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def scrape(port, timeout=5.0):
    t = time.monotonic()
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=timeout) as r:
        body = r.read().decode()
    return time.monotonic() - t, body


def samples(body, name):
    """(labels text, value) of every sample of `name`."""
    out = []
    for line in body.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            head, _, value = line.rpartition(" ")
            out.append((head[len(name):], float(value)))
    return out


def label(labels, key):
    marker = key + '="'
    i = labels.find(marker)
    if i < 0:
        return None
    return labels[i + len(marker):].split('"', 1)[0]


def post(sock, body, close=False):
    head = (
        "POST /api/v1/report HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: %d\r\n%s\r\n" % (len(body), "Connection: close\r\n" if close else "")
    )
    sock.sendall(head.encode() + body)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            return 0
        data += chunk
    status = int(data.split(b" ", 2)[1])
    head, _, rest = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    while len(rest) < length:
        chunk = sock.recv(4096)
        if not chunk:
            break
        rest += chunk
    return status


def flooder(path, uuids, seconds, out):
    rng = random.Random(os.getpid())
    statuses = {}
    idle = []
    conn = None
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
        kind = rng.random()
        uuid = rng.choice(uuids)
        if kind < 0.4:
            body = {"version": 1, "devices": [{"uuid": uuid, "allocated_bytes": 1 << 30,
                                               "reserved_bytes": 2 << 30}]}
        elif kind < 0.7:
            body = {"version": 1,
                    "devices": [{"uuid": uuid, "allocated_bytes": 1 << 30, "reserved_bytes": 2 << 30,
                                 "alloc_retries": n, "ooms": n}],
                    "events": [{"kind": "oom", "name": uuid}]}
        elif kind < 0.85:
            body = {"version": 1, "devices": [{"uuid": "GPU-elsewhere-%d" % rng.randrange(1000),
                                               "allocated_bytes": 1, "reserved_bytes": 1}]}
        else:
            body = None
        payload = json.dumps(body).encode() if body is not None else b"\x00garbage"
        try:
            if conn is None:
                conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                conn.settimeout(5)
                conn.connect(path)
            status = post(conn, payload)
            if status == 0:
                conn.close()
                conn = None
        except OSError:
            status = -1
            if conn is not None:
                conn.close()
            conn = None
        statuses[status] = statuses.get(status, 0) + 1
        if len(idle) < 20 and rng.random() < 0.05:
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(path)
                idle.append(s)
            except OSError:
                pass
    out.put(statuses)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/gpumem-exporter")
    ap.add_argument("--procs", type=int, default=40)
    ap.add_argument("--seconds", type=float, default=30.0)
    args = ap.parse_args()

    d = tempfile.mkdtemp()
    cfg = os.path.join(d, "config.yml")
    with open(cfg, "w") as f:
        f.write(CONFIG)
    path = os.path.join(d, "ingest.sock")
    port = free_port()
    ex = subprocess.Popen(
        [args.bin, "--source", "sim", "--config", cfg, "--sample-interval", "1s",
         "--web.listen-address", "127.0.0.1:%d" % port, "--ingest.socket", path],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                _, body = scrape(port)
                if "gpumem_process_used_bytes{" in body:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        time.sleep(1.5)
        _, body = scrape(port)
        listed = {label(l, "pid") for l, _ in samples(body, "gpumem_process_used_bytes")}
        uuids = sorted({label(l, "uuid") for l, _ in samples(body, "gpumem_gpu_info")})

        out = mp.Queue()
        flooders = [mp.Process(target=flooder, args=(path, uuids, args.seconds, out))
                    for _ in range(args.procs)]
        for p in flooders:
            p.start()
        latencies, worst_risk, missing = [], 0.0, set()
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            took, body = scrape(port)
            latencies.append(took)
            for l, v in samples(body, "gpumem_oom_risk_level"):
                if label(l, "pid") is None:
                    worst_risk = max(worst_risk, v)
            seen = {label(l, "pid") for l, _ in samples(body, "gpumem_process_used_bytes")}
            missing |= listed - seen
            time.sleep(0.1)
        statuses = {}
        for _ in flooders:
            for k, v in out.get().items():
                statuses[k] = statuses.get(k, 0) + v
        for p in flooders:
            p.join()
        _, body = scrape(port)
        rss = 0
        with open("/proc/%d/status" % ex.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        latencies.sort()
        result = {
            "flooding_processes": args.procs,
            "seconds": args.seconds,
            "answers_by_status": {str(k): v for k, v in sorted(statuses.items())},
            "scrapes": len(latencies),
            "scrape_ms_median": round(1000 * latencies[len(latencies) // 2], 2),
            "scrape_ms_p99": round(1000 * latencies[int(len(latencies) * 0.99)], 2),
            "scrape_ms_max": round(1000 * latencies[-1], 2),
            "nvml_listed_processes": len(listed),
            "listed_processes_missing_in_any_scrape": sorted(missing),
            "highest_gpu_risk_during_flood": worst_risk,
            "rejected": {label(l, "reason"): v for l, v in samples(body, "gpumem_ingest_rejected_total") if v},
            "unlisted_total": sum(v for _, v in samples(body, "gpumem_ingest_unlisted_total")),
            "tracked_processes": sum(v for _, v in samples(body, "gpumem_exporter_tracked_processes")),
            "exporter_rss_kib": rss,
        }
        print(json.dumps(result, indent=2))
        ok = not missing and worst_risk == 0 and result["scrape_ms_max"] < 100
        return 0 if ok else 1
    finally:
        ex.terminate()
        ex.wait()


if __name__ == "__main__":
    sys.exit(main())
