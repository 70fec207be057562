# Sourced by the test scripts that need Python packages: the venv they share, made once.
#   VENV     the venv's folder (GPUMEM_VENV overrides; default .venv-test)
#   apt_install PKG...   Debian packages, as root (fails, saying why, otherwise)
#   ensure_venv          make the venv unless it works; on Debian, where `python3 -m venv`
#                        fails without ensurepip, install python3-venv and make it again
VENV="${GPUMEM_VENV:-.venv-test}"
PYTHON="${PYTHON:-python3}"

apt_install() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "$(basename "$0"): not root, cannot apt-get install $*" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

make_venv() {
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
}

ensure_venv() {
    if ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
        if ! make_venv; then
            echo "$(basename "$0"): '$PYTHON -m venv' failed; installing python3-venv" >&2
            apt_install python3-venv
            make_venv
        fi
    fi
}
