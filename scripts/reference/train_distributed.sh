#!/bin/bash

# REFERENCE LOOP, KEPT FOR COMPARISON: this is the PerforatedAI distributed
# recipe's train_distributed.sh (DDP setup, step 8), with its logic unchanged,
# flaws included: init re-run on every start, a fixed 2 s sleep between
# generations, no retry, no signal handling.  pai-launch's supervisor replaces
# it; benchmarks run this to compare.
#
# Only parametrized so a benchmark can run it:
#   SAVE_NAME, PYTHON_SCRIPT, NUM_GPUS  from the environment (recipe defaults otherwise)
#   TORCHRUN (default: torchrun), PYTHON (default: python)
#   extra arguments ("$@") are passed to every python/torchrun run of the script.
#
# Usage: SAVE_NAME=PAI PYTHON_SCRIPT=train.py NUM_GPUS=2 ./train_distributed.sh [script args...]

# PerforatedAI DistributedDataParallel Training Script
# This script handles automatic restarting when dendrites are added

SAVE_NAME="${SAVE_NAME:-PAI}"  # Use the save_name from UPA.perforate_model
PYTHON_SCRIPT="${PYTHON_SCRIPT:-train.py}"  # Their actual script filename
NUM_GPUS="${NUM_GPUS:-1}"  # Number of GPUs they specified
TORCHRUN="${TORCHRUN:-torchrun}"
PYTHON="${PYTHON:-python}"

echo "Step 1: Initializing PAI DDP settings..."
# Run initialization on single GPU (no DDP launcher)
$PYTHON $PYTHON_SCRIPT --perforate_model_parallel "$@"

echo ""
echo "Initialization complete. Starting continuous DDP training loop..."
echo "Press Ctrl+C to stop training"
echo ""

# Continuous training loop with DDP launcher
while true; do
    # Check for completion at loop start (in case of restart after completion)
    if [ -f "${SAVE_NAME}/.training_complete" ]; then
        echo "Training already completed!"
        break
    fi

    # Check if any switch_*.pt checkpoint files exist
    if ls "${SAVE_NAME}"/switch_*.pt 1> /dev/null 2>&1; then
        echo "Resuming training from checkpoint..."
        $TORCHRUN --nproc_per_node=$NUM_GPUS $PYTHON_SCRIPT --pai_load_folder $SAVE_NAME "$@"
    else
        echo "Starting training from beginning..."
        $TORCHRUN --nproc_per_node=$NUM_GPUS $PYTHON_SCRIPT "$@"
    fi

    # Check exit code
    EXIT_CODE=$?

    # Check if training completed successfully
    if [ -f "${SAVE_NAME}/.training_complete" ]; then
        echo "Training completed successfully!"
        break
    fi

    if [ $EXIT_CODE -eq 0 ]; then
        echo "Model restructured. Restarting in 2 seconds..."
        sleep 2
    else
        echo "Error occurred. Exiting..."
        exit $EXIT_CODE
    fi
done
