#!/usr/bin/env bash
# Tests of the Python client (clients/python) in a virtual environment of their own.
#
#   tests/python_client.sh            # venv in .venv-test (GPUMEM_VENV overrides)
#
# Needs python3 >= 3.9. On Debian, where `python3 -m venv` fails without ensurepip, the
# python3-venv package is installed (as root) and the venv created again.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=tests/venv.sh
. tests/venv.sh
ensure_venv

"$VENV/bin/python" -m pip install -q --disable-pip-version-check pytest
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e clients/python
"$VENV/bin/python" -c 'import gpumem_client, sys; print("gpumem_client", gpumem_client.__version__, "on Python", sys.version.split()[0])'
exec "$VENV/bin/python" -m pytest -ra clients/python/tests
