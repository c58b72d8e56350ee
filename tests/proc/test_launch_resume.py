"""--resume-from: a script that loads SAVE/latest.pt resumes a failed first generation mid-way (pai-launch passes
--pai_load_folder once latest.pt is there and whole); a script that loads switch_N.pt gets the flag only once a switch
file exists, so a crash before the first one starts over, as that script needs."""

from __future__ import annotations

import pytest

from tests.proc.launch_files import generations

pytestmark = pytest.mark.timeout(90)

#: Generation 1 trains (rank 0 rewrites latest.pt), then it fails; generation 2 completes the run.
CRASH_IN_GENERATION_1 = ["--heartbeat", "0.05", "--train-seconds", "0.4", "--fail-rank", "0", "--fail-generation", "1",
                         "--generations", "2"]


def _loads(scene) -> list[tuple[int, str | None]]:
    return [(int(r["env"]["PAI_LAUNCH_GENERATION"]), r["load_folder"]) for r in scene.records() if not r["init"]]


def test_with_resume_from_latest_a_crash_before_the_first_switch_resumes_from_latest_pt(scene):
    launch, rc = scene.run("--nproc", "2", "--backoff", "0.1", "--resume-from", "latest",
                           script_args=[*CRASH_IN_GENERATION_1, "--load-stage", "latest"])

    assert rc == 0, launch.log_summary()
    assert launch.event("generation_failed")["generation"] == 1
    # Generation 1 started on an empty folder (no flag: the script would fail to load); its retry resumes.
    assert generations(launch) == [(1, None), (2, "PAI")]
    assert _loads(scene) == [(1, None), (1, None), (2, "PAI"), (2, "PAI")]


def test_a_script_that_loads_switch_files_starts_over_after_a_crash_before_the_first_one(scene):
    launch, rc = scene.run("--nproc", "2", "--backoff", "0.1", script_args=CRASH_IN_GENERATION_1)

    assert rc == 0, launch.log_summary()
    assert (scene.work / "PAI" / "latest.pt").is_file(), "latest.pt was there: the switch stage ignores it"
    assert generations(launch) == [(1, None), (2, None)]


def test_a_torn_latest_pt_is_moved_aside_and_the_retry_starts_over(scene):
    torn = ["--torn-latest-generation", "1"]
    launch, rc = scene.run("--nproc", "2", "--backoff", "0.1", "--resume-from", "latest",
                           script_args=[*CRASH_IN_GENERATION_1, "--load-stage", "latest", *torn])

    assert rc == 0, launch.log_summary()
    quarantined = launch.event("checkpoint_quarantined")
    assert quarantined["file"] == "latest.pt" and "quarantine" in quarantined["moved_to"]
    assert generations(launch)[:2] == [(1, None), (2, None)]


def test_resume_from_is_checked_before_anything_starts(scene):
    launch, rc = scene.run("--resume-from", "newest")

    assert rc == 2
    assert "--resume-from 'newest' is unknown: use switch" in launch.stderr
    assert scene.records() == [] and not (scene.work / "PAI").exists()
