"""What the live end-to-end checks share: a time budget, child processes stopped by their own
pid, webhook receivers, Prometheus queries, and the Alertmanager configuration of
alerts/README.md. Standard library only.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))

GPUMEM_BIN = os.environ.get("GPUMEM_BIN", os.path.join(ROOT, "target", "debug", "gpumem-exporter"))
PROMETHEUS = os.environ.get("PROMETHEUS", "/usr/bin/prometheus")
ALERTMANAGER = os.environ.get("ALERTMANAGER", "/usr/bin/prometheus-alertmanager")
PROMTOOL = os.environ.get("PROMTOOL", "/usr/bin/promtool")


class Failure(Exception):
    pass


class Budget:
    """Seconds left of a run that may take at most `total`."""

    def __init__(self, total):
        self.total, self.t0 = total, time.monotonic()

    def elapsed(self):
        return time.monotonic() - self.t0

    def remaining(self):
        return self.total - self.elapsed()

    def log(self, msg):
        print(f"[{self.elapsed():6.1f}s] {msg}", flush=True)


def require_binaries():
    """Fail, saying what to install, when the exporter, Prometheus or Alertmanager is missing."""
    for path, what in ((GPUMEM_BIN, "exporter (build it with `cargo build`, or set GPUMEM_BIN)"),
                       (PROMETHEUS, "Prometheus (Debian package prometheus)"),
                       (ALERTMANAGER, "Alertmanager (Debian package prometheus-alertmanager)")):
        if not os.access(path, os.X_OK):
            raise Failure(f"{what} not found at {path}")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout, budget):
    try:
        with urllib.request.urlopen(url, timeout=min(timeout, max(budget.remaining(), 0.5))) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, socket.timeout):
        return None, ""


def wait_for(pred, timeout, what, budget):
    end = time.monotonic() + min(timeout, max(budget.remaining(), 0))
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.25)
    raise Failure(f"timed out after {timeout:.0f}s waiting for {what}")


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


class Children:
    """Child processes, each stopped by its own pid at the end."""

    def __init__(self, tmp, budget):
        self.tmp, self.budget, self.procs = tmp, budget, []

    def start(self, name, argv):
        out = open(os.path.join(self.tmp, f"{name}.log"), "wb")
        self.budget.log(f"start {name}: {' '.join(argv)}")
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.tmp)
        self.procs.append((name, p, out))
        return p

    def check_alive(self):
        for name, p, _ in self.procs:
            if p.poll() is not None:
                raise Failure(f"{name} exited early with status {p.returncode}")

    def stop_all(self):
        for name, p, _ in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for name, p, out in reversed(self.procs):
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.budget.log(f"{name} (pid {p.pid}) did not stop")
            out.close()

    def tail(self, n=40):
        for name, _, _ in self.procs:
            path = os.path.join(self.tmp, f"{name}.log")
            try:
                with open(path, "rb") as f:
                    lines = f.read().decode("utf-8", "replace").splitlines()[-n:]
            except OSError:
                continue
            print(f"----- last lines of {name}.log -----")
            for line in lines:
                print("  " + line)


class Webhook:
    """Alertmanager webhook receivers: every POST body, by path, with the time it arrived."""

    def __init__(self):
        self.lock = threading.Lock()
        self.posts = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0") or 0)
                body = self.rfile.read(min(n, 10 << 20))
                received = time.time()
                try:
                    doc = json.loads(body)
                except ValueError:
                    doc = {"unparsable": body.decode("utf-8", "replace")}
                with hook.lock:
                    hook.posts.append((self.path, doc, received))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
        self.thread.start()

    def alerts(self):
        """(path, alert, arrival time) of every alert in every notification so far."""
        with self.lock:
            posts = list(self.posts)
        for path, doc, received in posts:
            for a in doc.get("alerts", []) if isinstance(doc, dict) else []:
                yield path, a, received

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Prom:
    def __init__(self, port, budget):
        self.base = f"http://127.0.0.1:{port}"
        self.budget = budget

    def _get(self, path, params):
        url = self.base + path + "?" + urllib.parse.urlencode(params)
        status, body = http_get(url, 5, self.budget)
        if status is None:
            return None, "no answer"
        try:
            doc = json.loads(body)
        except ValueError:
            return None, f"HTTP {status}: {body[:200]}"
        if doc.get("status") != "success":
            return None, f"{doc.get('errorType')}: {doc.get('error')}"
        return doc["data"], None

    def query(self, expr):
        data, err = self._get("/api/v1/query", {"query": expr})
        return (data["result"] if data else None), err

    def query_range(self, expr, start, end, step):
        data, err = self._get("/api/v1/query_range", {"query": expr, "start": start, "end": end, "step": step})
        return (data["result"] if data else None), err

    def api(self, path):
        status, body = http_get(self.base + path, 5, self.budget)
        if status != 200:
            raise Failure(f"GET {path}: HTTP {status}")
        return json.loads(body)["data"]


def readme_section(title):
    """The first ```yaml block under the heading `title` of alerts/README.md."""
    with open(os.path.join(ROOT, "alerts", "README.md"), encoding="utf-8") as f:
        text = f.read()
    at = text.index("\n## " + title + "\n")
    m = re.search(r"```yaml\n(.*?)```", text[at:], re.S)
    if not m:
        raise Failure(f"alerts/README.md: no yaml block under '## {title}'")
    return m.group(1)


# Keep equal to the example in alerts/README.md.
INHIBIT_RULES = """\
inhibit_rules:
  - source_matchers: [alertname="GpuMemExporterDown"]
    target_matchers: [alertname=~"GpuMemory.*|GpuMemDeviceDown"]
    equal: [instance]
  - source_matchers: [alertname="GpuMemDeviceDown"]
    target_matchers: [alertname=~"GpuMemory.*"]
    equal: [instance, gpu]
  - source_matchers: [alertname="GpuMemoryOomImminent"]
    target_matchers: [alertname="GpuMemoryOomRiskHigh"]
    equal: [instance, gpu]
  - source_matchers: [severity="critical"]
    target_matchers: [severity="warning"]
    equal: [alertname, instance, gpu, pid]
"""


def shipped_route_config(hook_port):
    """Alertmanager with the routing of alerts/README.md as it is (its `route:` block verbatim),
    its receivers replaced by webhooks of this script (`/<receiver name>`), and its inhibit
    rules."""
    example = readme_section("Alertmanager: routing")
    route = example[: example.index("\nreceivers:")].rstrip() + "\n"
    names = re.findall(r"^  - name: (\S+)", example[example.index("\nreceivers:"):], re.M)
    if not names:
        raise Failure("alerts/README.md: the routing example names no receivers")
    receivers = "receivers:\n" + "".join(
        f"  - name: {n}\n    webhook_configs:\n      - url: http://127.0.0.1:{hook_port}/{n}\n        send_resolved: true\n"
        for n in names)
    return route + receivers + INHIBIT_RULES


def start_alertmanager(children, tmp, port):
    """Alertmanager with `tmp`/alertmanager.yml on loopback `port`, alone (no cluster)."""
    os.makedirs(os.path.join(tmp, "am-data"))
    children.start("alertmanager", [ALERTMANAGER, f"--config.file={os.path.join(tmp, 'alertmanager.yml')}",
                                    f"--storage.path={os.path.join(tmp, 'am-data')}",
                                    f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
                                    "--log.level=warn"])


def start_prometheus(children, tmp, port, extra=()):
    """Prometheus with `tmp`/prometheus.yml on loopback `port`, with `extra` flags."""
    children.start("prometheus", [PROMETHEUS, f"--config.file={os.path.join(tmp, 'prometheus.yml')}",
                                  f"--storage.tsdb.path={os.path.join(tmp, 'prom-data')}",
                                  f"--web.listen-address=127.0.0.1:{port}", *extra, "--log.level=warn"])


def prometheus_config(exporter_port, am_port, rule_files, interval="1s"):
    """Prometheus scraping the exporter and evaluating `rule_files` every `interval`, sending
    alerts to the Alertmanager on `am_port`."""
    rules = "\n".join(f"  - {r}" for r in rule_files)
    return f"""\
global:
  scrape_interval: {interval}
  scrape_timeout: {interval}
  evaluation_interval: {interval}
rule_files:
{rules}
alerting:
  alertmanagers:
    - static_configs:
        - targets: ['127.0.0.1:{am_port}']
scrape_configs:
  # The job name follows the convention of alerts/README.md (it contains "gpumem"), and the
  # exporter's own `job` label (training job) becomes `exported_job`.
  - job_name: gpumem-exporter
    honor_labels: false
    static_configs:
      - targets: ['127.0.0.1:{exporter_port}']
"""


def run_check(name, tmp, budget, run):
    """Runs `run(children, hook)` with the check's children and webhook, stops them whatever
    happens (a watchdog ends the process 15 s after the budget), prints the verdict and keeps
    `tmp` where the check failed or GPUMEM_E2E_KEEP=1. Returns the exit status."""
    children = Children(tmp, budget)
    hook = None
    failures = []

    def on_signal(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    watchdog = threading.Timer(budget.total + 15, lambda: (budget.log("watchdog: out of time"),
                                                           children.stop_all(), os._exit(3)))
    watchdog.daemon = True
    watchdog.start()
    try:
        hook = Webhook()
        failures = run(children, hook)
    except Failure as e:
        failures = [str(e)]
    except KeyboardInterrupt as e:
        failures = [f"interrupted ({e})"]
    finally:
        children.stop_all()
        if hook:
            hook.close()
        watchdog.cancel()
    if failures:
        children.tail()
        print(f"\n{name} FAILED:")
        for f in failures:
            print("  - " + f)
    else:
        print(f"\n{name} PASSED in {budget.elapsed():.0f}s")
    if os.environ.get("GPUMEM_E2E_KEEP") == "1" or failures:
        print(f"logs and what was observed: {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0
