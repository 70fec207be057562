#!/usr/bin/env bash
# Build the NVML stand-in: tests/nvml_standin/build.sh OUTDIR
#
# Writes OUTDIR/libnvidia-ml.so.1 (and the link libnvidia-ml.so) and prints OUTDIR, as an
# absolute path, on stdout; nothing else goes there. The Rust and the Python tests both call
# it. CC names another compiler than `cc`.
set -euo pipefail

if [ $# -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
cc=${CC:-cc}
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "$0: no C compiler: '$cc' is not on PATH; the NVML stand-in needs one (Debian: apt-get install gcc)" >&2
    exit 127
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
# Built beside the target and renamed over it: a process that has the library loaded, or a
# second build into the same folder, never sees half a file.
tmp="$out/.libnvidia-ml.so.1.$$"
trap 'rm -f "$tmp"' EXIT
"$cc" -std=c99 -shared -fPIC -O2 -Wall -Wextra -Werror -pthread -fvisibility=hidden \
    -Wl,-soname,libnvidia-ml.so.1 -o "$tmp" "$here/nvml_standin.c"
mv -f "$tmp" "$out/libnvidia-ml.so.1"
ln -sfn libnvidia-ml.so.1 "$out/libnvidia-ml.so"
echo "$out"
