# Sourced by demo.sh and test.sh: create ./.venv on first use and install pai-launch with what its
# demo and tests need. Re-installs only when pyproject.toml or this file changed.
#
# On a machine without an NVIDIA GPU, torch is pinned to the 2.13.0 CPU build (with the torchvision
# release that matches it, in the same pip command, so perforatedai cannot pull a CUDA build).
# Set PAI_LAUNCH_VENV to use another environment folder.

PAI_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PAI_VENV=${PAI_LAUNCH_VENV:-$PAI_ROOT/.venv}

pai_env_setup() {
    local python=${PYTHON:-python3}
    if [ ! -x "$PAI_VENV/bin/python" ]; then
        echo "creating $PAI_VENV" >&2
        "$python" -m venv "$PAI_VENV" || return 1
    fi
    local stamp="$PAI_VENV/.pai-launch-installed"
    local want
    want=$(cat "$PAI_ROOT/pyproject.toml" "$PAI_ROOT/scripts/env.sh" | sha256sum | cut -d' ' -f1)
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        return 0
    fi
    local torch_pins=()
    if ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }; then
        torch_pins=(torch==2.13.0 torchvision==0.28.0)
    fi
    echo "installing pai-launch and its dependencies into $PAI_VENV" >&2
    "$PAI_VENV/bin/python" -m pip install --disable-pip-version-check -q "${torch_pins[@]}" perforatedai -e "$PAI_ROOT[test]" \
        2> >(grep -v "^WARNING: Location" >&2) || return 1
    echo "$want" > "$stamp"
}
