"""--resume-from over whole histories, in this process: a script that loads SAVE/latest.pt resumes a failed first
generation mid-way (--pai_load_folder once latest.pt is there and whole); a script that loads switch_N.pt gets the
flag only once a switch file exists. (A real PerforatedAI script resuming from latest.pt: tests/real.)"""

from __future__ import annotations

from tests.scripted_world import Gen, checkpoint, complete, play, torn

#: Generation 1 trains (rank 0 writes latest.pt), then it fails.
CRASH_AFTER_LATEST = Gen(writes=(("latest.pt", checkpoint()),), failures=((0, 3, "rank 0 failing on purpose with 3"),))


def test_with_resume_from_latest_a_crash_before_the_first_switch_resumes_from_latest_pt(tmp_path):
    played = play(tmp_path, [CRASH_AFTER_LATEST, complete()], resume_from="latest")

    assert played.exit_code == 0, played.names()
    assert played.event("generation_failed")["generation"] == 1
    # Generation 1 started on an empty folder (no flag: the script would fail to load); its retry resumes.
    assert played.processes.load_folders() == [None, "PAI"]


def test_a_script_that_loads_switch_files_starts_over_after_a_crash_before_the_first_one(tmp_path):
    played = play(tmp_path, [CRASH_AFTER_LATEST, complete()], resume_from="switch")

    assert played.exit_code == 0, played.names()
    assert (tmp_path / "PAI" / "latest.pt").is_file(), "latest.pt was there: the switch stage ignores it"
    assert played.processes.load_folders() == [None, None]


def test_a_torn_latest_pt_is_moved_aside_and_the_retry_starts_over(tmp_path):
    crash_torn = Gen(writes=(("latest.pt", torn()),), failures=((0, 3, "rank 0 failing on purpose with 3"),))
    played = play(tmp_path, [crash_torn, complete()], resume_from="latest")

    assert played.exit_code == 0, played.names()
    quarantined = played.event("checkpoint_quarantined")
    assert quarantined["file"] == "latest.pt" and "quarantine" in quarantined["moved_to"]
    assert played.processes.load_folders() == [None, None]
