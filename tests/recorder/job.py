"""A stand-in training job for the recorder's tests: it "allocates" by raising its own line in
the stand-in NVML library's script (tests/nvml_standin), and with torch=1 through a fake torch
module, so a CI machine without a GPU runs the recorder's real paths: NVML, the per-process
allocator parts, process groups and signals.

    python3 job.py gpu=0 grow=33554432 run=30 term=default|ignore|exitN worker=-1|GPU torch=0|1 oom_after=-1|S marks=DIR
"""

import fcntl
import os
import signal
import subprocess
import sys
import time

args = dict(a.split("=", 1) for a in sys.argv[1:])
gpu = int(args.get("gpu", "0"))
grow = int(args.get("grow", str(32 << 20)))
run = float(args.get("run", "30"))
term = args.get("term", "default")
worker = int(args.get("worker", "-1"))
use_torch = args.get("torch", "0") == "1"
oom_after = float(args.get("oom_after", "-1"))
marks = args["marks"]
script = os.environ["GPUMEM_NVML_SCRIPT"]
BASE = 512 << 20
pid = os.getpid()


def set_usage(nbytes):
    """Rewrite the script with this process at ``nbytes`` on its GPU (None: gone)."""
    with open(script + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(script) as f:
            lines = [l for l in f.read().splitlines() if l.strip()]
        procs = [l for l in lines if l.startswith("proc ") and l.split()[2] != str(pid)]
        if nbytes is not None:
            procs.append("proc %d %d %d" % (gpu, pid, nbytes))
        out = []
        for l in lines:
            if l.startswith("gpu "):
                f = l.split()
                f[4] = str(BASE + sum(int(p.split()[3]) for p in procs if p.split()[1] == f[1]))
                out.append(" ".join(f))
            elif not l.startswith("proc "):
                out.append(l)
        tmp = "%s.%d.tmp" % (script, pid)
        with open(tmp, "w") as f:
            f.write("\n".join(out + procs) + "\n")
        os.replace(tmp, script)


def mark(name):
    with open(os.path.join(marks, "%s-%d" % (name, pid)), "w") as f:
        f.write(str(time.time()))


if term == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
elif term.startswith("exit"):
    code = int(term[4:])

    def on_term(*_):
        mark("term")
        os._exit(code)

    signal.signal(signal.SIGTERM, on_term)
mark("pid")
if worker >= 0:
    argv = [a for a in sys.argv[1:] if not a.startswith(("gpu=", "worker="))]
    subprocess.Popen([sys.executable, sys.argv[0]] + argv + ["gpu=%d" % worker])
torch = None
if use_torch:
    import torch

    torch.cuda.set_device(gpu)
    if gpu != 0:
        # What a DDP worker keeps on GPU 0 besides its own GPU: a small context.
        torch.cuda.allocate(0, 64 << 20)
used = 0
start = time.time()
while time.time() - start < run:
    used += grow
    set_usage(used)
    if torch is not None:
        torch.cuda.allocate(gpu, used)
        if 0 <= oom_after <= time.time() - start:
            torch.cuda.out_of_memory(gpu, request=8 << 30, free=1 << 30)
    time.sleep(0.2)
set_usage(None)
