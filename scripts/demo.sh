#!/usr/bin/env bash
# The demo: PerforatedAI training with 2 DDP workers, init -> restructures -> complete, under pai-launch.
# Runs in ./demo-run (moved aside, never deleted, if it exists from an earlier demo).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
pai_env_setup
run_dir="$PAI_ROOT/demo-run"
if [ -e "$run_dir" ]; then
    mv "$run_dir" "$run_dir.$(date +%Y%m%d-%H%M%S)"
fi
mkdir -p "$run_dir"
cd "$run_dir"
exec "$PAI_VENV/bin/pai-launch" --nproc 2 "$PAI_ROOT/examples/train_pai_ddp.py" "$@"
