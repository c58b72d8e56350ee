"""The example as a script that resumes from SAVE/latest.pt (the stage some scripts load: PerforatedAI rewrites it
every epoch) when that is newer than the newest switch file; rank 1 crashes once in generation 1, after its first
epoch."""

import os
import runpy
import sys
from pathlib import Path

from pai_launch import training as pt

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_pai_ddp.py"
CRASHED = os.environ["PAI_TEST_CRASHED_FLAG"]


def load_latest(run, model, folder):
    """The newest point saved: latest.pt when it is newer than the newest switch file (a crash mid-generation), else
    that switch file (PerforatedAI writes latest.pt before a restructure's switch_N.pt)."""
    if folder is None:
        return model
    latest = Path(folder) / "latest.pt"
    switch = pt.newest_switch(folder)
    if switch is not None and (Path(folder) / f"{switch}.pt").stat().st_mtime_ns >= latest.stat().st_mtime_ns:
        return real_load_newest(run, model, folder)
    from perforatedai import utils_perforatedai as UPA

    model = UPA.load_system(model, str(folder), "latest", True).to(run.device)
    print(f"[latest] rank {run.rank} loaded {folder}/latest.pt", flush=True)
    return model


real_load_newest, real_add_validation_score = pt.load_newest, pt.add_validation_score


def add_validation_score_then_crash_once(run, score, model):
    result = real_add_validation_score(run, score, model)  # rank 0 has written latest.pt by now
    if os.environ.get("PAI_LAUNCH_GENERATION") == "1" and run.rank == 1 and not os.path.exists(CRASHED):
        open(CRASHED, "w").close()
        print("[latest] rank 1 crashing on purpose after its first epoch", file=sys.stderr, flush=True)
        os._exit(1)
    return result


pt.load_newest = load_latest
pt.add_validation_score = add_validation_score_then_crash_once
sys.argv[0] = str(EXAMPLE)
runpy.run_path(str(EXAMPLE), run_name="__main__")
