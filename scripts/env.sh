# Sourced by demo.sh and test.sh: create ./.venv on first use and install pai-launch with what its
# demo and tests need. Re-installs only when pyproject.toml, scripts/constraints.txt or this file
# changed.
#
# Every version is pinned: torch and torchvision here (torch==2.13.0 with the torchvision release
# that matches it, on every machine, in the same pip command as perforatedai, which depends on
# torchvision, so it cannot pull another torch build), everything else by scripts/constraints.txt.
#
# PAI_LAUNCH_DEPS=latest (e.g. PAI_LAUNCH_DEPS=latest ./scripts/test.sh) checks the project against
# the newest release of every dependency instead: it ignores the constraints and installs with
# --upgrade (eager, so dependencies of dependencies too) into ./.venv-latest, every time it is
# sourced, so the default .venv keeps its pins. torch and torchvision stay pinned even then: the
# newest torch is a multi-GB CUDA download, and the torch pin is the one the project is tested with.
# Set PAI_LAUNCH_VENV to use another environment folder (in either mode).

PAI_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PAI_DEPS=${PAI_LAUNCH_DEPS:-pinned}
case "$PAI_DEPS" in
    pinned) PAI_VENV=${PAI_LAUNCH_VENV:-$PAI_ROOT/.venv} ;;
    latest) PAI_VENV=${PAI_LAUNCH_VENV:-$PAI_ROOT/.venv-latest} ;;
    *)
        echo "env.sh: PAI_LAUNCH_DEPS must be 'pinned' (the default) or 'latest', not '$PAI_DEPS'" >&2
        # Ends the sourcing script (test.sh and demo.sh run with set -e), or this file if run directly.
        return 2 2>/dev/null || exit 2
        ;;
esac

pai_env_setup() {
    local python=${PYTHON:-python3}
    if [ ! -x "$PAI_VENV/bin/python" ]; then
        echo "creating $PAI_VENV" >&2
        "$python" -m venv "$PAI_VENV" || return 1
    fi
    local stamp="$PAI_VENV/.pai-launch-installed"
    local constraints="$PAI_ROOT/scripts/constraints.txt"
    local pip_args
    if [ "$PAI_DEPS" = latest ]; then
        # No stamp check: each run upgrades to what is newest now, the dependencies of dependencies
        # too (eager). The stamp goes, so a pinned run in this folder re-installs the pins.
        rm -f "$stamp"
        pip_args=(--upgrade --upgrade-strategy eager)
        echo "installing pai-launch and the newest releases of its dependencies into $PAI_VENV" >&2
    else
        local want
        want=$(cat "$PAI_ROOT/pyproject.toml" "$constraints" "$PAI_ROOT/scripts/env.sh" | sha256sum | cut -d' ' -f1)
        if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
            return 0
        fi
        pip_args=(-c "$constraints")
        echo "installing pai-launch and its pinned dependencies into $PAI_VENV" >&2
    fi
    "$PAI_VENV/bin/python" -m pip install --disable-pip-version-check -q "${pip_args[@]}" \
        torch==2.13.0 torchvision==0.28.0 perforatedai -e "$PAI_ROOT[test]" \
        2> >(grep -v "^WARNING: Location" >&2) || return 1
    if [ "$PAI_DEPS" = pinned ]; then
        echo "$want" > "$stamp"
    fi
}
