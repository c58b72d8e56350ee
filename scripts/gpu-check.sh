#!/usr/bin/env bash
# The GPU check (scripts/gpu_check.py): on a machine with one NVIDIA GPU, in under 8 minutes, one table of what only
# a GPU shows (the agent and forkserver never touch CUDA, warm workers are good forks, NCCL through 10 generations,
# the restart gap cold / warm / in-process, GPU memory across 10 in-process restructures).
#
# torch is the machine's own CUDA build (PYTHON, default python3, must import it and see the GPU); pai-launch and
# perforatedai go into ./.venv-gpu beside it (--system-site-packages), with torch held at the installed version. On a
# machine without the network, set PAI_LAUNCH_WHEELS to a folder of their wheels.
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
[ -x "$venv/bin/python" ] || "$python" -m venv --system-site-packages "$venv"
pins=$(mktemp)
trap 'rm -f "$pins"' EXIT
echo "torch==$torch_version" > "$pins"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -c "$pins" \
    ${PAI_LAUNCH_WHEELS:+--no-index --find-links "$PAI_LAUNCH_WHEELS"} -e "$root" perforatedai
exec timeout 480 "$venv/bin/python" "$root/scripts/gpu_check.py"
