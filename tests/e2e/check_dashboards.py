#!/usr/bin/env python3
"""Static checks of the Grafana dashboards in grafana/, and extraction of their PromQL.

Standard library only. Run from anywhere:

    python3 tests/e2e/check_dashboards.py            # check, print a summary
    python3 tests/e2e/check_dashboards.py --queries  # also print every query, variables substituted

Checks, for every grafana/*.json:
  - valid JSON, schemaVersion >= 39;
  - `uid` present, equal to the file name without `.json` (stable) and unique;
  - a template variable `datasource` of type `datasource` with query `prometheus`;
  - every panel (rows' nested panels too) has fieldConfig.defaults.unit;
  - every panel, target and annotation query uses {"type": "prometheus", "uid": "${datasource}"}
    (no hard-coded data source anywhere; Grafana's built-in annotation source excepted);
  - every target has an `expr`, and every template variable it names is defined;
  - every metric it names is a family of docs/metrics.md, a recorded series of
    alerts/gpumem-rules.yaml, or ALERTS/up.

The e2e test (run_e2e.py) imports `extract_queries()` to run every query against a real
Prometheus: template variables are replaced by their "All" value (`allValue`, e.g. `.*`, or
`.+` for pid), Grafana's interval variables by fixed durations.
"""
import glob
import json
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "mixin"))
from lint import lint_dashboards, walk_panels  # noqa: E402
DASH_DIR = os.path.join(ROOT, "grafana")
METRICS_DOC = os.path.join(ROOT, "docs", "metrics.md")
RULES = os.path.join(ROOT, "alerts", "gpumem-rules.yaml")

# Grafana's own variables, replaced by durations that suit a 1 s scrape interval too.
BUILTIN_VARS = {"__rate_interval": "1m", "__interval": "15s", "__range": "5m", "__interval_ms": "15000",
                "__range_s": "300"}
EXTRA_METRICS = {"ALERTS", "ALERTS_FOR_STATE", "up"}
PROMQL_WORDS = {
    "sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile", "count_values",
    "group", "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool",
    "offset", "rate", "irate", "increase", "delta", "idelta", "deriv", "changes", "resets", "vector",
    "scalar", "abs", "ceil", "floor", "round", "clamp", "clamp_min", "clamp_max", "label_replace",
    "label_join", "histogram_quantile", "predict_linear", "time", "timestamp", "absent", "absent_over_time",
    "avg_over_time", "min_over_time", "max_over_time", "sum_over_time", "count_over_time",
    "last_over_time", "present_over_time", "quantile_over_time", "stddev_over_time", "sort", "sort_desc",
    "exp", "ln", "log2", "log10", "sqrt", "inf", "nan", "atan2", "sgn",
}
VAR_RE = re.compile(r"\$\{(\w+)(?::[\w]+)?\}|\[\[(\w+)(?::[\w]+)?\]\]|\$(\w+)")


def documented_metrics():
    names = set()
    with open(METRICS_DOC, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"\|\s*`([a-zA-Z_:][a-zA-Z0-9_:]*)`\s*\|", line)
            if m:
                names.add(m.group(1))
    return names


def recorded_series():
    with open(RULES, encoding="utf-8") as f:
        return set(re.findall(r"^\s*-?\s*record:\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*$", f.read(), re.M))


def variables(dash):
    return {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}


def substitute(expr, dash_vars, overrides=None):
    """Replace template variables: `overrides` first, then Grafana's interval variables, then a
    query variable's "All" value (allValue, or .*), a textbox/custom/constant variable's value."""
    overrides = overrides or {}

    def repl(m):
        name = m.group(1) or m.group(2) or m.group(3)
        if name in overrides:
            return overrides[name]
        if name in BUILTIN_VARS:
            return BUILTIN_VARS[name]
        v = dash_vars.get(name)
        if v is None:
            return m.group(0)
        if v.get("type") in ("textbox", "custom", "constant"):
            cur = v.get("current", {}).get("value")
            return cur if isinstance(cur, str) else v.get("query", "")
        return v.get("allValue") or ".*"
    return VAR_RE.sub(repl, expr)


def metric_names(expr):
    # Strip strings, label matchers, durations and numbers; what is left that looks like an
    # identifier and is not a PromQL keyword or a label list member is a metric name.
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\boffset\s+-?[$\w]+", " ", e)  # a duration, or a variable holding one
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\b(group_left|group_right)\b", " ", e)
    names = set()
    for tok in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e):
        if tok in PROMQL_WORDS or re.fullmatch(r"[0-9.e+-]+", tok):
            continue
        names.add(tok)
    return names


def dashboard_files():
    return sorted(glob.glob(os.path.join(DASH_DIR, "*.json")))


def extract_queries(paths=None, overrides=None):
    """[(file, panel title, refId, expr with variables substituted, raw expr)], panels then annotations."""
    out = []
    for path in paths or dashboard_files():
        with open(path, encoding="utf-8") as f:
            dash = json.load(f)
        dv = variables(dash)
        name = os.path.basename(path)
        for p in walk_panels(dash.get("panels")):
            for t in p.get("targets", []) or []:
                if t.get("expr"):
                    out.append((name, p.get("title", ""), t.get("refId", ""), substitute(t["expr"], dv, overrides), t["expr"]))
        for a in dash.get("annotations", {}).get("list", []):
            if a.get("expr"):
                out.append((name, "annotation: " + a.get("name", ""), "", substitute(a["expr"], dv, overrides), a["expr"]))
    return out


def check(paths=None):
    problems = []
    known = documented_metrics() | recorded_series() | EXTRA_METRICS
    paths = paths or dashboard_files()
    if len(paths) < 3:
        problems.append(f"expected at least 3 dashboards in grafana/, found {len(paths)}")
    dashboards = {}
    for path in paths:
        name = os.path.basename(path)
        try:
            with open(path, encoding="utf-8") as f:
                dashboards[path] = json.load(f)
        except (OSError, ValueError) as e:
            problems.append(f"{name}: not valid JSON: {e}")
    # The structure (uids, data sources, units, grid): the mixin's lint, the one implementation.
    problems += lint_dashboards(dashboards, None, file_named_after_uid=True)
    for path, dash in dashboards.items():
        name = os.path.basename(path)

        def bad(msg):
            problems.append(f"{name}: {msg}")

        if not isinstance(dash.get("schemaVersion"), int) or dash["schemaVersion"] < 39:
            bad(f"schemaVersion {dash.get('schemaVersion')!r} < 39")
        dv = variables(dash)
        panels = list(walk_panels(dash.get("panels")))
        for p in panels:
            title = p.get("title", f"panel {p.get('id')}")
            for t in p.get("targets") or []:
                expr = t.get("expr") or ""
                for m in VAR_RE.finditer(expr):
                    vn = m.group(1) or m.group(2) or m.group(3)
                    if vn not in dv and vn not in BUILTIN_VARS:
                        bad(f"panel {title!r}: expr uses undefined variable ${vn}")
                for metric in metric_names(expr):
                    if metric not in known:
                        bad(f"panel {title!r}: metric {metric!r} is neither in docs/metrics.md nor recorded")
        for a in dash.get("annotations", {}).get("list", []):
            if a.get("builtIn"):
                continue
            for metric in metric_names(a.get("expr", "")):
                if metric not in known:
                    bad(f"annotation {a.get('name')!r}: metric {metric!r} unknown")
    return problems


def main():
    problems = check()
    queries = extract_queries()
    if "--queries" in sys.argv:
        for f, title, ref, expr, _ in queries:
            print(f"{f} | {title} | {ref} | {expr}")
    for p in problems:
        print("FAIL:", p)
    print(f"{len(dashboard_files())} dashboards, {len(queries)} queries, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
