#!/usr/bin/env python3
"""What gpumem_client costs a real training loop on a CUDA GPU.

Runs a small transformer's training steps N at a time without the client, with the client
reporting every 1.0 s and every 0.01 s, alternating the order over several rounds, and prints
steps/s and the overhead of each client setting against no client. Then it times the
client's pieces (memory_stats, memory_snapshot, one report) and prints a JSON line with this
process's pid, device UUID and torch.cuda.memory_stats() allocated/reserved bytes, so that a
check on a GPU node can compare them with what the exporter serves.

    python bench_overhead.py                                  # against a fake exporter
    python bench_overhead.py --exporter-socket /run/gpumem/ingest.sock --hold 30

Without --exporter-socket a fake exporter (an HTTP/1.1 server on a Unix socket that answers
202) runs in a child process started by this script, so it works anywhere PyTorch sees a GPU;
it is not a thread of this process, so that serving reports does not take this process's
interpreter lock and inflate the overhead measured.
"""

import argparse
import http.server
import json
import os
import signal
import socket
import socketserver
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)  # run from a checkout without installing

# --------------------------------------------------------------------------- fake exporter


def serve_fake(path):
    """A stand-in exporter: answers every report with 202, counts them."""
    count = [0]

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            creds = self.connection.getsockopt(
                socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")
            )
            pid = struct.unpack("3i", creds)[0]
            try:
                ok = json.loads(body).get("version") == 1
            except ValueError:
                ok = False
            status = 202 if ok else 400
            answer = {"accepted": True, "pid": pid} if ok else {
                "error": "not a version-1 body", "reason": "malformed"}
            data = json.dumps(answer).encode()
            count[0] += 1
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

        def address_string(self):
            return "unix"

    class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True

        def handle_error(self, request, client_address):
            pass  # a client that went away mid-answer

    srv = Server(path, Handler)

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        srv.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()
        sys.stderr.write("fake exporter: %d reports\n" % count[0])


def start_fake_exporter():
    tmp = tempfile.mkdtemp(prefix="gmbench")
    path = os.path.join(tmp, "ingest.sock")
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve-fake", path])
    deadline = time.monotonic() + 20
    while not os.path.exists(path):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the fake exporter did not start")
        time.sleep(0.05)
    return proc, path, tmp


# --------------------------------------------------------------------------- the workload


def build(args, torch):
    from torch import nn

    device = torch.device("cuda", args.device)
    torch.cuda.set_device(device)
    torch.manual_seed(0)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(args.vocab, args.d_model)
            layer = nn.TransformerEncoderLayer(
                args.d_model, args.heads, 4 * args.d_model, dropout=0.0, batch_first=True
            )
            self.layers = nn.TransformerEncoder(layer, args.layers)
            self.norm = nn.LayerNorm(args.d_model)
            self.lm_head = nn.Linear(args.d_model, args.vocab)

        def forward(self, idx):
            return self.lm_head(self.norm(self.layers(self.embed(idx))))

    model = Model().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, args.vocab, (args.batch, args.seq), device=device)
    y = torch.randint(0, args.vocab, (args.batch, args.seq), device=device)
    loss_fn = nn.CrossEntropyLoss()
    return model, opt, x, y, loss_fn


def make_step(model, opt, x, y, loss_fn, phases):
    import gpumem_client

    def plain():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x).flatten(0, 1), y.flatten())
        loss.backward()
        opt.step()

    def with_phases():
        opt.zero_grad(set_to_none=True)
        with gpumem_client.phase("forward"):
            loss = loss_fn(model(x).flatten(0, 1), y.flatten())
        with gpumem_client.phase("backward"):
            loss.backward()
        with gpumem_client.phase("optimizer"):
            opt.step()

    return with_phases if phases else plain


def timed_run(torch, step, steps, interval, sock):
    """steps/s over ``steps`` steps; with the client reporting every ``interval`` s if given."""
    import gpumem_client

    client = None
    if interval is not None:
        client = gpumem_client.start(interval=interval, socket=sock)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    stats = None
    if client is not None:
        stats = dict(client.stats)
        gpumem_client.stop()
    return steps / elapsed, stats


def micro(torch, dev, sock, repeat=200):
    """Microseconds of the client's pieces, measured here in the training process."""
    import gpumem_client

    def per_call(fn, n=repeat):
        fn()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t0) / n * 1e6

    client = gpumem_client.Client(socket=sock)
    out = {
        "memory_stats_us": per_call(lambda: torch.cuda.memory_stats(dev)),
        "memory_snapshot_us": per_call(lambda: torch.cuda.memory_snapshot(), n=50),
        "collect_us": per_call(lambda: client._collect(snapshot=False)),
        "collect_with_snapshot_us": per_call(lambda: client._collect(snapshot=True), n=50),
        "report_roundtrip_us": per_call(client.flush, n=100),
        "phase_enter_exit_us": per_call(lambda: client.phase("p").__enter__().__exit__(None)),
    }
    client._events.clear()
    out["report_stats"] = dict(client.stats)
    client.stop(flush=False)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=200, help="steps per timed run")
    p.add_argument("--rounds", type=int, default=3, help="runs of each setting, alternated")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--device", type=int, default=int(os.environ.get("LOCAL_RANK", "0")))
    p.add_argument("--phases", action="store_true", help="wrap forward/backward/optimizer "
                   "in gpumem_client.phase() in the client runs")
    p.add_argument("--exporter-socket", metavar="PATH",
                   help="report to a real exporter's ingest socket instead of a fake one")
    p.add_argument("--hold", type=float, default=0.0, metavar="SECONDS",
                   help="at the end, keep reporting (every 1 s) this long without allocating, "
                   "so that the exporter's /metrics can be compared with the JSON line")
    p.add_argument("--serve-fake", metavar="PATH", help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.serve_fake:
        serve_fake(args.serve_fake)
        return

    import torch

    import gpumem_client
    from gpumem_client import _collect

    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this benchmark needs a GPU")

    fake = None
    sock = args.exporter_socket
    if sock is None:
        fake = start_fake_exporter()
        sock = fake[1]
    try:
        model, opt, x, y, loss_fn = build(args, torch)
        uuid = _collect.format_uuid(torch.cuda.get_device_properties(args.device).uuid)
        print("device cuda:%d %s %s" % (args.device, torch.cuda.get_device_name(args.device),
                                        uuid))
        print("exporter: %s%s" % (sock, " (fake)" if fake else ""))
        n_params = sum(p.numel() for p in model.parameters())
        print("model: %d layers, d_model %d, %.1fM parameters, batch %dx%d, phases %s" % (
            args.layers, args.d_model, n_params / 1e6, args.batch, args.seq,
            "on" if args.phases else "off"))

        plain = make_step(model, opt, x, y, loss_fn, phases=False)
        client_step = make_step(model, opt, x, y, loss_fn, phases=args.phases)
        for _ in range(args.warmup):
            plain()
        torch.cuda.synchronize()

        settings = [("no client", None), ("interval 1.0", 1.0), ("interval 0.01", 0.01)]
        rates = {name: [] for name, _ in settings}
        accepted = {name: 0 for name, _ in settings}
        for r in range(args.rounds):
            order = settings[r % len(settings):] + settings[:r % len(settings)]
            for name, interval in order:
                step = plain if interval is None else client_step
                rate, stats = timed_run(torch, step, args.steps, interval, sock)
                rates[name].append(rate)
                if stats:
                    accepted[name] += stats["accepted"]
                print("round %d  %-14s %8.2f steps/s  %6.2f ms/step%s" % (
                    r + 1, name, rate, 1e3 / rate,
                    "  reports %s" % stats if stats else ""))

        base = statistics.median(rates["no client"])
        print()
        print("%-14s %12s %10s %10s" % ("setting", "steps/s", "ms/step", "overhead"))
        summary = {}
        for name, _ in settings:
            med = statistics.median(rates[name])
            overhead = (base - med) / base * 100.0
            summary[name] = {"steps_per_s": round(med, 3), "overhead_pct": round(overhead, 3),
                             "runs": [round(v, 3) for v in rates[name]],
                             "reports_accepted": accepted[name]}
            print("%-14s %12.2f %10.2f %9.2f%%" % (name, med, 1e3 / med, overhead))
        print("(median of %d runs of %d steps; negative overhead is noise)" % (
            args.rounds, args.steps))

        costs = micro(torch, args.device, sock)
        print()
        for k, v in costs.items():
            if k.endswith("_us"):
                print("%-26s %9.1f us" % (k, v))
        print("BENCH " + json.dumps({"summary": summary, "costs": costs}, sort_keys=True))

        # What the exporter should show for this process, right now.
        client = gpumem_client.start(interval=1.0, socket=sock)
        gpumem_client.report_model(model, opt)
        time.sleep(1.5)
        torch.cuda.synchronize()
        stats = torch.cuda.memory_stats(args.device)
        check = {
            "pid": os.getpid(),
            "device_uuid": uuid,
            "allocated_bytes": stats["allocated_bytes.all.current"],
            "reserved_bytes": stats["reserved_bytes.all.current"],
            "exporter_socket": sock,
            "exporter_pid": client.last_pid,
            "client_stats": dict(client.stats),
        }
        print("MEMORY " + json.dumps(check, sort_keys=True), flush=True)
        if args.hold > 0:
            print("holding %.0f s; reporting every 1 s" % args.hold, flush=True)
            time.sleep(args.hold)
        gpumem_client.stop()
    finally:
        if fake is not None:
            proc, path, tmp = fake
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
            try:
                os.unlink(path)
                os.rmdir(tmp)
            except OSError:
                pass


if __name__ == "__main__":
    main()
