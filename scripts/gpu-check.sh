#!/usr/bin/env bash
# The GPU check (scripts/gpu_check.py): on a machine with one NVIDIA GPU, in under 8 minutes, one table of what only
# a GPU shows (the agent and forkserver never touch CUDA, warm workers are good forks and how soon they reach CUDA,
# NCCL through 10 generations, NCCL2 as torch 2.15's default and TORCH_DIST_USE_NCCL2=0, the restart gap cold / warm /
# in-process, GPU memory across 10 in-process restructures).
#
# torch is the machine's own CUDA build (PYTHON, default python3, must import it and see the GPU); pai-launch runs
# from this checkout. perforatedai and pai-launch's dependencies go into ./.venv-gpu beside that torch
# (--system-site-packages), with torch held at the installed version. On a machine without the network, set
# PAI_LAUNCH_WHEELS to a folder of the wheels it lacks: they are unpacked into a folder of their own (no index, no
# build) and put on PYTHONPATH ahead of the machine's packages.
# Exit 0: every check passed; 1: one failed; 2: no GPU here.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${PYTHON:-python3}
venv=${PAI_LAUNCH_GPU_VENV:-$root/.venv-gpu}
if ! command -v nvidia-smi >/dev/null; then
    echo "gpu-check: no nvidia-smi: run this on a machine with an NVIDIA GPU and its driver" >&2
    exit 2
fi
torch_version=$("$python" -c 'import torch; print(torch.__version__)') || {
    echo "gpu-check: $python cannot import torch: set PYTHON to an interpreter with a CUDA build of torch" >&2; exit 2; }
if [ -n "${PAI_LAUNCH_WHEELS:-}" ]; then
    site=$venv-site
    "$python" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile --upgrade \
        --target "$site" "$PAI_LAUNCH_WHEELS"/*.whl
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
    checker=$python
else
    [ -x "$venv/bin/python" ] || "$python" -m venv --system-site-packages "$venv"
    pins=$(mktemp)
    trap 'rm -f "$pins"' EXIT
    echo "torch==$torch_version" > "$pins"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -c "$pins" -e "$root" perforatedai
    checker=$venv/bin/python
fi
timeout 480 "$checker" "$root/scripts/gpu_check.py"
