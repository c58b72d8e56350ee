#!/usr/bin/env bash
# A virtual environment with another torch and Python, for the tier that runs pai-launch on the torches and Pythons
# it supports (tests/compat): scripts/torch_env.sh TORCH TORCHVISION PYTHON [test], e.g. scripts/torch_env.sh 2.4.1
# 0.19.1 3.10 ("test" adds the project's test extra, for an environment whose own pytest runs the unit tier).
#
# It prints the environment's folder. The environment holds that torch, the torchvision made for it, perforatedai
# and pai-launch's dependencies, at the versions in scripts/constraints/torch-TORCH-pyPYTHON.txt (written from the
# first install when that file does not exist yet), and pai-launch itself, installed (not editable) from this checkout
# on every call. Environments are kept by version under ${PAI_LAUNCH_CACHE:-~/.cache/pai-launch}/venvs, because
# every torch but the project's own pin is a multi-GB CUDA build from the registry (it runs on the CPU too); one is
# installed again only when its constraints or this script change. The install names its torch exactly, so a pip
# setting that caps torch (PIP_CONSTRAINT, a pip.conf constraint) is lifted for it alone.
#
# Exit codes: 0 ready; 3 that Python is not installed (the message says how to get it); 1 the install failed.
set -euo pipefail

if [ $# -lt 3 ] || [ $# -gt 4 ] || { [ $# -eq 4 ] && [ "$4" != test ]; }; then
    echo "usage: scripts/torch_env.sh TORCH TORCHVISION PYTHON [test]   (e.g. 2.4.1 0.19.1 3.10)" >&2
    exit 2
fi
torch_version=$1 torchvision_version=$2 python_version=$3 extra=${4:-}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${PAI_LAUNCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pai-launch}
venv="$cache/venvs/torch-$torch_version-py$python_version"
constraints="$root/scripts/constraints/torch-$torch_version-py$python_version.txt"

find_python() {
    # pyenv's own interpreter first: its shim on PATH answers only where that version is selected.
    local name="python$python_version" found
    for found in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$python_version".*/bin/"$name" "$(command -v "$name" || true)"; do
        if [ -n "$found" ] && [ -x "$found" ] && "$found" -c "import venv" >/dev/null 2>&1; then
            echo "$found"
            return 0
        fi
    done
    return 1
}

fingerprint() {
    { echo "$python_version $torch_version $torchvision_version $extra"; cat "${BASH_SOURCE[0]}"
      if [ -f "$constraints" ]; then cat "$constraints"; fi; } | sha256sum | cut -d' ' -f1
}

if ! python=$(find_python); then
    echo "python$python_version not found (on PATH or in pyenv's versions): install it, e.g. pyenv install $python_version" >&2
    exit 3
fi

stamp="$venv/.pai-launch-env"
want=$(fingerprint)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "installing torch $torch_version with Python $python_version into $venv (a CUDA build: several GB)" >&2
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    "$python" -m venv "$venv"
    pins=()
    if [ -f "$constraints" ]; then pins=(-c "$constraints"); fi
    # torch, torchvision and perforatedai in one command, so pip cannot take another torch for torchvision.
    PIP_CONSTRAINT=/dev/null "$venv/bin/python" -m pip install --disable-pip-version-check -q "${pins[@]}" \
        "torch==$torch_version" "torchvision==$torchvision_version" perforatedai==3.2.9 \
        psutil typer watchdog structlog prometheus_client \
        2> >(grep -v "^WARNING: Location" >&2)
    if [ "$extra" = test ]; then
        # The test extra's tools (pytest and its plugins, the schema and style checkers), torch held where it is.
        "$venv/bin/python" -m pip freeze | grep -iE '^torch==' > "$venv/.torch-pin"
        PIP_CONSTRAINT=/dev/null "$venv/bin/python" -m pip install --disable-pip-version-check -q "${pins[@]}" \
            -c "$venv/.torch-pin" "$root[test]" 2> >(grep -v "^WARNING: Location" >&2)
    fi
    if [ ! -f "$constraints" ]; then
        mkdir -p "$(dirname "$constraints")"
        { echo "# The versions scripts/torch_env.sh installs for torch $torch_version on Python $python_version."
          "$venv/bin/python" -m pip freeze --all | grep -viE '^(pip|pai-launch)[=@ ]'; } > "$constraints"
        want=$(fingerprint)
    fi
    echo "$want" > "$stamp"
fi
"$venv/bin/python" -m pip install --disable-pip-version-check -q --no-deps --force-reinstall "$root" \
    2> >(grep -v "^WARNING: Location" >&2) >&2
echo "$venv"
