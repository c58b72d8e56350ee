"""An ordinary training script that was never adapted to PerforatedAI: its argparse knows none of the
flags pai-launch adds (--perforate_model_parallel, --pai_load_folder), so the init run dies in argparse."""

import argparse

parser = argparse.ArgumentParser(description="a plain training script")
parser.add_argument("--epochs", type=int, default=1)
args = parser.parse_args()
print(f"training for {args.epochs} epoch(s)")
