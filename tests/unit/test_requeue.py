"""--requeue-on's request to Slurm (supervise.loop.requeue): whether the job was requeued is decided by evidence, not
by scontrol's exit code alone. Slurm ends every process of the job as it requeues it, scontrol's own included, so a
killed `scontrol requeue` may have done its work; Slurm's Restarts=N then says so. The process tests run a fake
scontrol on PATH that really dies of a signal."""

from __future__ import annotations

import os
import stat

import pytest

from pai_launch.supervise.loop import requeue

pytestmark = pytest.mark.timeout(30)

#: A line of real `scontrol show job` output (Slurm 23.11) for a job requeued once.
SHOWN = ("JobId=7 JobName=pai-launch.sbatch\n   UserId=root(0) GroupId=root(0) MCS_label=N/A\n"
         "   Priority=1 Nice=0 Account=(null) QOS=(null)\n   JobState=PENDING Reason=BeginTime Dependency=(null)\n"
         "   Requeue=1 Restarts=1 BatchFlag=1 Reboot=0 ExitCode=0:0\n")


def test_restarts_are_read_from_scontrols_show_job():
    assert requeue.restarts_shown(SHOWN) == 1
    assert requeue.restarts_shown(SHOWN.replace("Restarts=1", "Restarts=12")) == 12
    assert requeue.restarts_shown("JobId=7 JobState=RUNNING") is None


@pytest.mark.parametrize(("error", "restarts", "count", "requeued"), [
    (None, None, 0, True),                          # scontrol exited 0
    ("was killed by SIGTERM", 1, 0, True),          # killed, but Slurm counts the restart
    ("was killed by SIGTERM", 3, 2, True),          # the same on the job's third run
    ("was killed by SIGTERM", 0, 0, False),         # killed before the requeue took effect
    ("was killed by SIGTERM", 2, 2, False),         # the count is this run's own, not a new one
    ("was killed by SIGTERM", None, 0, False),      # Slurm could not be asked
    ("exited 1: Requested operation is presently disabled", 0, 0, False),
])
def test_the_verdict_follows_slurms_count_of_restarts_where_scontrol_did_not_exit_0(error, restarts, count, requeued):
    result = requeue.verdict(error, restarts, count)
    assert result.requeued is requeued
    if requeued:
        assert result.error == "" and result.evidence
        if error:
            assert error in result.evidence and f"{restarts} restart(s)" in result.evidence
    else:
        assert result.error == f"scontrol requeue {error}" and result.evidence == ""


FAKE_SCONTROL = """\
#!/bin/sh
# requeue: {requeue}; show job: print the count that requeue left.
count_file="{folder}/restarts"
if [ "$1" = requeue ]; then
    {requeue}
fi
if [ "$1" = show ]; then
    echo asked >> "{folder}/shown"
    echo "JobId=$3 JobName=x"
    echo "   Requeue=1 Restarts=$(cat "$count_file" 2>/dev/null || echo 0) BatchFlag=1"
    exit 0
fi
"""


def fake_scontrol(tmp_path, monkeypatch, on_requeue: str) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "scontrol"
    script.write_text(FAKE_SCONTROL.format(folder=folder, requeue=on_requeue))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.proc  # runs a fake scontrol
def test_a_scontrol_killed_after_the_requeue_took_effect_is_a_requeue(tmp_path, monkeypatch):
    # What Slurm does: the requeue is counted, then every process of the job, scontrol included, gets SIGTERM.
    fake_scontrol(tmp_path, monkeypatch, 'echo 1 > "$count_file"; kill -TERM $$; sleep 5')
    result = requeue.requeue("7", 0)
    assert result.requeued, result
    assert "was killed by SIGTERM" in result.evidence and "1 restart(s)" in result.evidence
    assert (tmp_path / "bin" / "shown").read_text() == "asked\n"


@pytest.mark.proc  # runs a fake scontrol
def test_a_scontrol_killed_before_the_requeue_took_effect_is_a_failure_that_says_so(tmp_path, monkeypatch):
    fake_scontrol(tmp_path, monkeypatch, "kill -KILL $$")
    result = requeue.requeue("7", 0)
    assert not result.requeued
    assert result.error == "scontrol requeue was killed by SIGKILL"


@pytest.mark.proc  # runs a fake scontrol
def test_a_refused_requeue_is_a_failure_with_slurms_words(tmp_path, monkeypatch):
    fake_scontrol(tmp_path, monkeypatch, 'echo "scontrol_requeue error: Requested operation is presently disabled" >&2;'
                                         " exit 1")
    result = requeue.requeue("7", 0)
    assert not result.requeued
    assert result.error == ("scontrol requeue exited 1: scontrol_requeue error: Requested operation is presently "
                            "disabled")


@pytest.mark.proc  # runs a fake scontrol
def test_a_requeue_scontrol_confirms_needs_no_second_question(tmp_path, monkeypatch):
    fake_scontrol(tmp_path, monkeypatch, "exit 0")
    result = requeue.requeue("7", 0)
    assert result == requeue.Requeue(True, evidence="scontrol requeue exited 0")
    assert not (tmp_path / "bin" / "shown").exists()


@pytest.mark.proc  # runs a fake scontrol
def test_a_missing_scontrol_is_a_failure_that_names_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    result = requeue.requeue("7", 0)
    assert not result.requeued and result.error.startswith("scontrol requeue could not start:")
