#!/bin/sh
# Static checks and unit tests of the Prometheus rules, and of the runbook links.
# Usage: tests/e2e/run_promtool.sh   (from anywhere; PROMTOOL overrides the promtool binary)
set -eu
cd "$(dirname "$0")/../.."
PROMTOOL="${PROMTOOL:-promtool}"

"$PROMTOOL" check rules alerts/*.yaml
"$PROMTOOL" test rules alerts/tests/*.yaml

# Every alert links to its own runbook, and the runbook exists.
status=0
for name in $(sed -n 's/^ *- alert: *\([A-Za-z0-9]*\).*/\1/p' alerts/gpumem-alerts.yaml | sort -u); do
  if [ ! -f "docs/runbooks/$name.md" ]; then
    echo "missing runbook docs/runbooks/$name.md" >&2; status=1
  fi
done
bad=$(grep 'runbook_url:' alerts/gpumem-alerts.yaml | grep -v 'https://github.com/gpumem-exporter/gpumem-exporter/blob/main/docs/runbooks/GpuMem[A-Za-z]*\.md$' || true)
if [ -n "$bad" ]; then echo "unexpected runbook_url: $bad" >&2; status=1; fi
# Each alert's runbook_url names the alert itself.
awk '/- alert:/ {a=$3} /runbook_url:/ {u=$2; sub(/.*\//, "", u); sub(/\.md$/, "", u); if (u != a) {print "runbook_url of " a " points at " u; bad=1}} END {exit bad}' alerts/gpumem-alerts.yaml >&2 || status=1
[ "$status" -eq 0 ] && echo "runbooks: every alert has its runbook"
exit "$status"
