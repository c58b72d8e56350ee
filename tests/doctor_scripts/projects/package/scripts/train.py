# A project whose training lives in a package beside scripts/ (relative imports inside it), reached through a
# sys.path entry. Data for tests/unit/test_doctor.py: read, never run. Its problems, one of each: the process group
# started at import time, the DDP wrapper discarded, resume from latest always, the save folder removed, the
# restructure handled in the same process, the load folder flag spelled with hyphens.
import argparse
import os
import sys

sys.path.append(os.path.dirname(__file__) + "/..")

from src.trainer import run  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--perforate_model_parallel", action="store_true")
parser.add_argument("--pai-load-folder", default=None)
parser.add_argument("--save", default="PAI")

if __name__ == "__main__":
    run(parser.parse_args())
