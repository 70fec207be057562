#!/usr/bin/env bash
# Tests of the Python client (clients/python) in a virtual environment of their own.
#
#   tests/python_client.sh            # venv in .venv-test (GPUMEM_VENV overrides)
#
# Needs python3 >= 3.9. On Debian, where `python3 -m venv` fails without ensurepip, the
# python3-venv package is installed (as root) and the venv created again.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV="${GPUMEM_VENV:-.venv-test}"
PYTHON="${PYTHON:-python3}"

make_venv() {
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
}

if ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    if ! make_venv; then
        echo "python_client.sh: '$PYTHON -m venv' failed; installing python3-venv" >&2
        if [ "$(id -u)" -ne 0 ]; then
            echo "python_client.sh: not root, cannot apt-get install python3-venv" >&2
            exit 1
        fi
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq python3-venv >/dev/null
        make_venv
    fi
fi

"$VENV/bin/python" -m pip install -q --disable-pip-version-check pytest
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e clients/python
"$VENV/bin/python" -c 'import gpumem_client, sys; print("gpumem_client", gpumem_client.__version__, "on Python", sys.version.split()[0])'
exec "$VENV/bin/python" -m pytest -ra clients/python/tests
