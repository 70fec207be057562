#!/usr/bin/env bash
# `gpumem-exporter top` in a real 80x24 terminal: tmux runs it detached, capture-pane reads the
# screen, send-keys types. Checks that GPU rows and processes appear, that `s` changes the sort,
# `2` shows only the second GPU's processes, `/` filters, and `q` ends the process with status 0.
# Bounded in time; exits non-zero on any failure.
#
#   tests/top_tmux.sh            # uses target/debug/gpumem-exporter (built if missing)
#   BIN=path/to/gpumem-exporter tests/top_tmux.sh
set -euo pipefail

cd "$(dirname "$0")/.."
BIN=${BIN:-target/debug/gpumem-exporter}
STEP_TIMEOUT=${STEP_TIMEOUT:-15}

if ! command -v tmux >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        timeout 300 apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -qq tmux >/dev/null
    else
        echo "top_tmux: tmux is not installed (apt-get install tmux)" >&2
        exit 1
    fi
fi
if [ ! -x "$BIN" ]; then
    timeout 900 cargo build --quiet
fi

SESSION="gpumem-top-$$"
WORK=$(mktemp -d)
cleanup() {
    tmux kill-session -t "$SESSION" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

fail() {
    echo "top_tmux: FAIL: $*" >&2
    echo "---- screen ----" >&2
    cat "$WORK/screen" >&2 2>/dev/null || true
    exit 1
}

screen() {
    tmux capture-pane -p -t "$SESSION" >"$WORK/screen" 2>/dev/null || true
    cat "$WORK/screen"
}

# Wait until the screen matches an extended regex.
wait_for() {
    local pattern=$1 what=$2 deadline=$((SECONDS + STEP_TIMEOUT))
    while [ $SECONDS -lt $deadline ]; do
        if screen | grep -Eq -- "$pattern"; then
            return 0
        fi
        sleep 0.2
    done
    fail "$what (no /$pattern/ on the screen)"
}

# The process table: the lines after the "Processes" title.
processes() {
    screen | sed -n '/Processes/,$p'
}

tmux new-session -d -s "$SESSION" -x 80 -y 24 \
    "$BIN top --source sim --sample-interval 200ms --refresh 0.3; echo \$? >'$WORK/status'; sleep 30"

wait_for 'GPU +name +used GiB' "the GPU table header"
wait_for '^4 +H100' "five GPU rows"
for i in 0 1 2 3 4; do
    screen | grep -Eq "^$i +H100" || fail "no row for GPU $i"
done
wait_for '^1400 ' "processes"
for pid in 1000 1100 1300 1400 1401; do
    processes | grep -Eq "^$pid " || fail "no process $pid"
done
screen | grep -q 'sort: used' || fail "the sort is not 'used' at start"
screen | grep -q 'q quit' || fail "the key help does not fit on 24 lines"
width=$(screen | LC_ALL=C.UTF-8 wc -L)
[ "$width" -le 80 ] || fail "a line is $width columns wide"

tmux send-keys -t "$SESSION" s
wait_for 'sort: risk' "'s' cycles the sort to risk"
tmux send-keys -t "$SESSION" s
wait_for 'sort: pid' "'s' cycles the sort to pid"
# Sorted by pid: 1000 is the first process row.
first=$(processes | awk 'NR > 2 && $1 ~ /^[0-9]+$/ { print $1; exit }')
[ "$first" = 1000 ] || fail "sorted by pid, the first process is $first"

tmux send-keys -t "$SESSION" 2
wait_for 'on GPU 1' "'2' selects the second GPU"
wait_for '^1100 ' "the second GPU's process"
processes | grep -Eq '^(1000|1200|1300|1400|1401) ' && fail "'2' still shows other GPUs' processes"
screen | grep -q 'show: GPU 1' || fail "the header does not name the selected GPU"

tmux send-keys -t "$SESSION" 0
wait_for 'Processes \(6\)' "'0' shows all GPUs again"
tmux send-keys -t "$SESSION" / 1 4 0 1 Enter
wait_for 'filter: 1401' "'/' filters"
wait_for 'Processes \(1\)' "the filter keeps one process"
processes | grep -Eq '^1401 ' || fail "the filter lost process 1401"

tmux send-keys -t "$SESSION" q
deadline=$((SECONDS + STEP_TIMEOUT))
while [ ! -s "$WORK/status" ] && [ $SECONDS -lt $deadline ]; do
    sleep 0.2
done
[ -s "$WORK/status" ] || fail "'q' did not end the process"
status=$(cat "$WORK/status")
[ "$status" = 0 ] || fail "top exited with status $status"
echo "top_tmux: ok"
