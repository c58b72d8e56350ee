"""tests/real/ddp_allreduce.py with --spin in generation 1 only: its workers all_reduce forever (so a rank
can be killed while the others block in the collective); a retry (generation 2 or later) runs to completion."""

import os
import runpy
import sys
from pathlib import Path

DDP_ALLREDUCE = Path(__file__).resolve().parent.parent / "real" / "ddp_allreduce.py"

extra = ["--spin"] if os.environ.get("PAI_LAUNCH_GENERATION") == "1" else []
sys.argv = [str(DDP_ALLREDUCE), *sys.argv[1:], *extra]
runpy.run_path(str(DDP_ALLREDUCE), run_name="__main__")
