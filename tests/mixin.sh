#!/usr/bin/env bash
# The monitoring mixin (mixin/) against the shipped rules and dashboards.
#
#   tests/mixin.sh            # venv in .venv-test (GPUMEM_VENV overrides)
#
# 1. Renders the mixin with its default _config and fails, printing a unified diff, when
#    alerts/*.yaml or grafana/*.json differ from the render in any byte (regenerate them with
#    `python3 mixin/render.py --write`), or when a file is shipped there that the mixin does not
#    render. The Helm chart links to those folders, so it carries the same files.
# 2. Lints the rendered dashboards (render.py): a unit on every panel that shows data, the
#    ${datasource} variable on every panel, target, query variable and annotation, a stable uid
#    from _config.dashboardUids equal to the file name, no overlapping panels; then the
#    repository's static dashboard checks (tests/e2e/check_dashboards.py).
# 3. Renders the override example of mixin/README.md and checks that its knobs reach the rules
#    and the dashboards, and that promtool accepts those rules where promtool is installed
#    (tests/all.sh installs it; tests/e2e/run_promtool.sh tests the shipped rules).
#
# Needs python3 >= 3.9. Installs PyYAML and the jsonnet wheel from PyPI into the venv; where no
# jsonnet wheel fits this Python, Debian's jsonnet command instead (as root). On Debian, where
# `python3 -m venv` fails without ensurepip, python3-venv is installed too (as root).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=tests/venv.sh
. tests/venv.sh
ensure_venv

pip=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
"${pip[@]}" 'pyyaml>=6'
# A wheel only: building jsonnet from its source needs a C++ compiler and minutes.
if ! "${pip[@]}" --only-binary=jsonnet 'jsonnet>=0.20,<0.23'; then
    echo "mixin.sh: no jsonnet wheel for this Python; using Debian's jsonnet command" >&2
    command -v jsonnet >/dev/null || apt_install jsonnet
fi
py="$VENV/bin/python"

echo "--- the shipped files are the mixin's default render"
"$py" mixin/render.py --check

echo "--- static dashboard checks of grafana/*.json"
python3 tests/e2e/check_dashboards.py

echo "--- overrides reach the rules and dashboards"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Keep equal to the example in mixin/README.md.
cat >"$tmp/custom.libsonnet" <<'JSONNET'
(import 'mixin.libsonnet') + {
  _config+:: {
    gpumemSelector: 'job="gpu-memory"',
    fragmentationSeriousRatio: 0.25,
    fragmentationSevereRatio: 0.35,
    fragmentationFor: '15m',
  },
}
JSONNET
"$py" mixin/render.py --mixin "$tmp/custom.libsonnet" --out "$tmp/out"
"$py" - "$tmp/out" <<'PY'
import json, os, sys, yaml

out = sys.argv[1]
alerts = yaml.safe_load(open(os.path.join(out, "alerts/gpumem-alerts.yaml")))
shipped = yaml.safe_load(open("alerts/gpumem-alerts.yaml"))
def key(r):
    return r["alert"], r["labels"]["severity"], r["labels"].get("imbalance")

rules = {key(r): r for g in alerts["groups"] for r in g["rules"]}
down = rules[("GpuMemExporterDown", "warning", None)]
assert down["expr"] == 'up{job="gpu-memory"} == 0', down["expr"]
for severity, band in (("warning", "0.25"), ("critical", "0.35")):
    r = rules[("GpuMemoryFragmentationHigh", severity, None)]
    assert f">= {band}\n" in r["expr"], r["expr"]
    assert r["for"] == "15m", r["for"]
assert "serious from 0.25, severe from 0.35" in rules[("GpuMemoryFragmentationHigh", "warning", None)]["annotations"]["description"]
# Nothing else moved.
changed = {("GpuMemExporterDown", "warning", None), ("GpuMemoryFragmentationHigh", "warning", None),
           ("GpuMemoryFragmentationHigh", "critical", None)}
others = [r for g in shipped["groups"] for r in g["rules"] if key(r) not in changed]
assert len(others) + len(changed) == len(rules) and all(rules[key(r)] == r for r in others)
assert yaml.safe_load(open(os.path.join(out, "alerts/gpumem-rules.yaml"))) == yaml.safe_load(open("alerts/gpumem-rules.yaml"))
dash = json.load(open(os.path.join(out, "grafana/gpumem-process.json")))
frag = next(p for p in dash["panels"] if p["title"] == "Fragmentation ratio")
steps = [s["value"] for s in frag["fieldConfig"]["defaults"]["thresholds"]["steps"]]
assert steps == [None, 0.15, 0.25, 0.35], steps
assert "for 15 minutes" in frag["description"], frag["description"]
print("overrides: selector, fragmentation bands and `for` reach the alerts and the dashboard")
PY
if command -v promtool >/dev/null; then
    promtool check rules "$tmp/out/alerts/"*.yaml
else
    echo "mixin.sh: promtool not installed; the overridden rules were not checked with it"
fi
