#!/usr/bin/env bash
# Tests of the Helm chart (helm/gpumem-exporter): lint, render, values schema, strict
# Kubernetes validation, rules and dashboards. Needs no helm binary and no cluster: Helm's
# engine comes from the PyPI package helm-python-sdk.
#
#   tests/helm/run.sh [pytest arguments]
#
# The Python environment is ${GPUMEM_VENV:-.venv-test} (relative to the repository root),
# created when missing.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
venv="${GPUMEM_VENV:-.venv-test}"

if [ ! -x "$venv/bin/python" ]; then
  if ! python3 -m venv "$venv"; then
    # Debian and Ubuntu ship venv's ensurepip separately.
    rm -rf "$venv"
    sudo_cmd=()
    if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
    if ! "${sudo_cmd[@]}" apt-get install -y python3-venv; then
      "${sudo_cmd[@]}" apt-get update
      "${sudo_cmd[@]}" apt-get install -y python3-venv
    fi
    python3 -m venv "$venv"
  fi
fi

"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  'helm-python-sdk>=0.2.2,<0.3' \
  'kubernetes-validate>=1.37' \
  'pytest>=8' \
  'pyyaml>=6'

# No .pytest_cache or __pycache__ left in the work tree.
export PYTHONDONTWRITEBYTECODE=1
exec "$venv/bin/python" -m pytest -ra -p no:cacheprovider tests/helm "$@"
