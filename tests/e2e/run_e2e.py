#!/usr/bin/env python3
"""End-to-end check of the alerting rules and dashboards against a live exporter.

Standard library only. Starts, on loopback ports chosen at random:
  - the exporter on its simulator (five GPUs: steady, leak, oom, frag, shared);
  - a real Prometheus (scrape and evaluation every 1 s) loading alerts/gpumem-rules.yaml and a
    copy of alerts/gpumem-alerts.yaml in which only the `for:` durations are scaled (by
    GPUMEM_E2E_FOR_SCALE, default 0.1, at least 1 s); every expression is the real one;
  - a real Alertmanager (no clustering) with the routing and inhibit rules of
    alerts/README.md, sending to webhook receivers that this script serves;
and asserts:
  1. every query of every dashboard panel (and annotation) returns data from that Prometheus,
     but for the few in ALLOW_NO_DATA (series that exist only after a fault);
  2. every recorded series of alerts/gpumem-rules.yaml has data, and no rule evaluates with
     an error;
  3. GpuMemoryOomImminent for the oom GPU reaches the paging receiver with severity critical;
  4. the calm GPU (steady scenario, gpu="0") raises nothing: no alert, pending or firing,
     carries its gpu label, in Prometheus or at any receiver.

Bounded in time: each wait has its own timeout, the whole run stops after TOTAL_BUDGET seconds,
and every child process is stopped at the end, also on failure or interruption.

Environment: GPUMEM_BIN (default target/debug/gpumem-exporter), PROMETHEUS (default
/usr/bin/prometheus), ALERTMANAGER (default /usr/bin/prometheus-alertmanager), PROMTOOL
(default /usr/bin/promtool, optional), GPUMEM_E2E_FOR_SCALE, GPUMEM_E2E_KEEP=1 keeps the temp
directory (logs, generated configs).
"""
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_dashboards  # noqa: E402
from stack import (GPUMEM_BIN, INHIBIT_RULES, PROMTOOL, ROOT, Budget, Failure, Prom, free_port,  # noqa: E402
                   http_get, prometheus_config, require_binaries, run_check, start_alertmanager, start_prometheus,
                   wait_for, write)

FOR_SCALE = float(os.environ.get("GPUMEM_E2E_FOR_SCALE", "0.1"))

TOTAL_BUDGET = 225.0      # seconds for the whole run (< 4 minutes with clean-up)
START_TIMEOUT = 30.0      # each child process must answer within this
MIN_OBSERVE = 60.0        # watch the calm GPU at least this long after Prometheus is up
POLL = 2.0
CALM_GPU = "0"            # position 0 of SIM_CONFIG
OOM_GPU = "2"             # position 2 of SIM_CONFIG

SIM_CONFIG = """\
sim:
  seed: 42
  gpus:
    - {scenario: steady}                  # gpu 0: calm training sawtooth, must raise nothing
    - {scenario: leak}                    # gpu 1: slow allocator leak
    - {scenario: oom, ramp_seconds: 90}   # gpu 2: ramp to OOM, must page
    - {scenario: frag}                    # gpu 3: fragmentation churn
    - {scenario: shared}                  # gpu 4: two processes, one leaks
"""

# Panel queries allowed to return nothing during the run, with the reason, keyed by
# (dashboard file, panel title, refId). Only for series that legitimately exist only during a
# fault the simulator does not produce. Empty today: every panel has data on the simulator
# (gpumem_oom_eta_seconds and ALERTS come from the oom GPU, the error counters are served at 0).
ALLOW_NO_DATA = {
}
# Template variable values used instead of the dashboards' own: the simulator enters only
# per-step phases (forward/backward/optimizer), which the phase annotation hides by default.
QUERY_OVERRIDES = {"step_phases": ""}

BUDGET = Budget(TOTAL_BUDGET)
log = BUDGET.log


def remaining():
    return BUDGET.remaining()


def parse_duration(text):
    total, pos = 0.0, 0
    for m in re.finditer(r"(\d+)(ms|s|m|h|d|w|y)", text):
        if m.start() != pos:
            raise ValueError(text)
        pos = m.end()
        total += int(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800,
                                    "y": 31536000}[m.group(2)]
    if pos != len(text) or not text:
        raise ValueError(text)
    return total


def scaled_alert_rules(src_text, scale):
    """The alert rules with every `for:` scaled; nothing else changes (checked)."""
    def repl(m):
        secs = parse_duration(m.group(2))
        return f"{m.group(1)}{max(1, math.ceil(secs * scale))}s{m.group(3)}"
    out = re.sub(r"^(\s*for:\s*)(\S+)(.*)$", repl, src_text, flags=re.M)
    a, b = src_text.splitlines(), out.splitlines()
    assert len(a) == len(b)
    for x, y in zip(a, b):
        if x != y and not re.match(r"^\s*for:", x):
            raise Failure(f"scaling changed a line that is not `for:`: {x!r}")
    return out


def alertmanager_config(hook_port):
    base = f"http://127.0.0.1:{hook_port}"
    return f"""\
route:
  receiver: tickets
  group_by: [alertname, instance, gpu, pid]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
  routes:
    - matchers: [severity="critical"]
      receiver: pager
receivers:
  - name: pager
    webhook_configs:
      - url: {base}/pager
        send_resolved: true
  - name: tickets
    webhook_configs:
      - url: {base}/tickets
        send_resolved: true
{INHIBIT_RULES}"""


def run(tmp, children, hook):
    require_binaries()

    # Static checks first: a broken dashboard fails fast.
    problems = check_dashboards.check()
    if problems:
        raise Failure("dashboard checks failed:\n  " + "\n  ".join(problems))
    queries = check_dashboards.extract_queries(overrides=QUERY_OVERRIDES)
    log(f"{len(queries)} dashboard queries to run")

    # Rules: the recording rules as they are, the alert rules with `for:` scaled.
    with open(os.path.join(ROOT, "alerts", "gpumem-alerts.yaml"), encoding="utf-8") as f:
        alerts_text = scaled_alert_rules(f.read(), FOR_SCALE)
    rules_file = os.path.join(tmp, "gpumem-rules.yaml")
    alerts_file = os.path.join(tmp, "gpumem-alerts.yaml")
    shutil.copyfile(os.path.join(ROOT, "alerts", "gpumem-rules.yaml"), rules_file)
    write(alerts_file, alerts_text)
    recorded = sorted(check_dashboards.recorded_series())
    if os.access(PROMTOOL, os.X_OK):
        r = subprocess.run([PROMTOOL, "check", "rules", rules_file, alerts_file], capture_output=True, timeout=30)
        if r.returncode != 0:
            raise Failure("promtool check rules failed on the generated rules:\n" + r.stdout.decode() + r.stderr.decode())

    exp_port, prom_port, am_port = free_port(), free_port(), free_port()
    write(os.path.join(tmp, "sim.yaml"), SIM_CONFIG)
    write(os.path.join(tmp, "alertmanager.yml"), alertmanager_config(hook.port))
    write(os.path.join(tmp, "prometheus.yml"), prometheus_config(exp_port, am_port, [rules_file, alerts_file]))

    children.start("exporter", [GPUMEM_BIN, "--source", "sim", "--web.listen-address", f"127.0.0.1:{exp_port}",
                                "--config", os.path.join(tmp, "sim.yaml"), "--sample-interval", "100ms",
                                "--ingest.socket", os.path.join(tmp, "ingest.sock")])
    start_alertmanager(children, tmp, am_port)
    start_prometheus(children, tmp, prom_port, ["--rules.alert.resend-delay=1s"])

    def up(url, needle=None):
        def pred():
            children.check_alive()
            status, body = http_get(url, 2, BUDGET)
            return status == 200 and (needle is None or needle in body)
        return pred

    wait_for(up(f"http://127.0.0.1:{exp_port}/metrics", "gpumem_used_bytes"), START_TIMEOUT, "the exporter's /metrics",
             BUDGET)
    log("exporter serves metrics")
    wait_for(up(f"http://127.0.0.1:{am_port}/-/ready"), START_TIMEOUT, "Alertmanager to be ready", BUDGET)
    log("alertmanager ready")
    wait_for(up(f"http://127.0.0.1:{prom_port}/-/ready"), START_TIMEOUT, "Prometheus to be ready", BUDGET)
    prom = Prom(prom_port, BUDGET)
    log("prometheus ready")
    wait_for(lambda: (prom.query('up{job="gpumem-exporter"} == 1')[0] or []) != [], START_TIMEOUT,
             "Prometheus to scrape the exporter", BUDGET)
    log("exporter scraped")
    observe_from = time.monotonic()

    pending = {(f, t, r): e for f, t, r, e, _ in queries}
    errors, got_data = {}, set()
    calm_alerts, imminent = {}, None
    while True:
        children.check_alive()
        for key, expr in list(pending.items()):
            result, err = prom.query(expr)
            if err and err != "no answer":
                errors[key] = f"{expr}\n      -> {err}"
                del pending[key]
            elif result:
                got_data.add(key)
                del pending[key]
        # The calm GPU: nothing pending or firing with its gpu label, nothing at a receiver.
        result, err = prom.query(f'ALERTS{{gpu="{CALM_GPU}"}}')
        for s in result or []:
            m = s["metric"]
            calm_alerts[(m.get("alertname"), m.get("alertstate"))] = m
        for path, a, _ in hook.alerts():
            labels = a.get("labels", {})
            if labels.get("gpu") == CALM_GPU:
                calm_alerts[(labels.get("alertname"), "sent to " + path)] = labels
            if (imminent is None and labels.get("alertname") == "GpuMemoryOomImminent"
                    and a.get("status") == "firing"):
                imminent = (path, labels, a.get("annotations", {}))
                log(f"GpuMemoryOomImminent reached {path}: {labels}")
        required_left = [k for k in pending if k not in ALLOW_NO_DATA]
        observed = time.monotonic() - observe_from
        if not required_left and imminent and observed >= MIN_OBSERVE:
            break
        if remaining() < 15:
            log("observation budget used up")
            break
        time.sleep(POLL)

    failures = []
    # 1. dashboard queries
    for key, msg in sorted(errors.items()):
        failures.append(f"query of {key[0]} / {key[1]!r} / {key[2]} failed: {msg}")
    for key in sorted(pending):
        if key in ALLOW_NO_DATA:
            log(f"no data (allowed: {ALLOW_NO_DATA[key]}): {key}")
        else:
            failures.append(f"query of {key[0]} / {key[1]!r} / {key[2]} returned no data: {dict((q[:3], q[3]) for q in queries)[key]}")
    log(f"dashboard queries with data: {len(got_data)} of {len(queries)}")
    # 2. recording rules and rule health
    for name in recorded:
        result, err = prom.query(name)
        if not result:
            failures.append(f"recorded series {name} has no data ({err or 'empty'})")
    for group in prom.api("/api/v1/rules")["groups"]:
        for rule in group["rules"]:
            if rule.get("health") == "err" or rule.get("lastError"):
                failures.append(f"rule {rule.get('name')} in {group['name']}: {rule.get('lastError')}")
    # 3. the page
    if imminent is None:
        failures.append("GpuMemoryOomImminent never reached a receiver")
    else:
        path, labels, ann = imminent
        if labels.get("severity") != "critical":
            failures.append(f"GpuMemoryOomImminent has severity {labels.get('severity')!r}, not critical")
        if path != "/pager":
            failures.append(f"GpuMemoryOomImminent was routed to {path}, not to the pager receiver")
        if labels.get("gpu") != OOM_GPU:
            failures.append(f"GpuMemoryOomImminent fired for gpu {labels.get('gpu')!r}, expected {OOM_GPU}")
        for k in ("summary", "description", "runbook_url"):
            if not ann.get(k):
                failures.append(f"GpuMemoryOomImminent has no {k} annotation")
        log(f"page description: {ann.get('description')}")
    # 4. the calm GPU
    for (name, state), labels in sorted(calm_alerts.items()):
        failures.append(f"calm GPU {CALM_GPU} raised {name} ({state}): {labels}")

    firing = prom.query('ALERTS{alertstate="firing"}')[0] or []
    log("firing at the end: " + ", ".join(sorted({f"{s['metric']['alertname']}{{gpu={s['metric'].get('gpu', '-')}}}"
                                                   for s in firing})))
    return failures


def main():
    tmp = tempfile.mkdtemp(prefix="gpumem-e2e-")
    return run_check("E2E", tmp, BUDGET, lambda children, hook: run(tmp, children, hook))


if __name__ == "__main__":
    sys.exit(main())
