"""Known causes named at the end of real failing runs: the reason says what went wrong and how to fix it, not only
the signal or the last line, and a crash after an epoch of training is never "before training started"."""

import os

import pytest

from tests.helpers import REPO, is_live, run_pai_launch

HERE = REPO / "tests" / "real"


def _run(tmp_path, script, *args, timeout=240):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    launch, seen = run_pai_launch(["--log-format", "json", "--backoff", "0.1", *args, str(HERE / script)], cwd=tmp_path,
                                  env=env, timeout=timeout)
    assert [p for p in seen if is_live(p)] == []
    return launch


@pytest.mark.timeout(300)
def test_the_gloo_buffer_size_abort_is_named_as_the_buffer_broadcast(tmp_path):
    launch = _run(tmp_path, "buffer_broadcast_script.py", "--nproc", "2", "--no-doctor")

    failed = [e for e in launch.events() if e["event"] == "generation_failed"]
    assert failed and failed[0]["doctor_id"] == "ddp-broadcast-buffers", failed
    reason = launch.events()[-1]["reason"]
    assert "buffer broadcast" in reason and "broadcast_buffers=False" in reason, reason


@pytest.mark.timeout(300)
def test_bdbquit_after_need_to_call_module_is_named_and_counted_as_training(tmp_path):
    launch = _run(tmp_path, "wrapped_score_script.py", "--nproc", "2")

    assert launch.popen.returncode not in (0, None)
    failed = [e for e in launch.events() if e["event"] == "generation_failed"]
    assert failed and all(f["reached_training"] for f in failed), failed
    assert failed[0]["doctor_id"] == "validation-score-wrapper", failed[0]
    reason = launch.events()[-1]["reason"]
    assert "model.module" in reason and "before training started" not in reason, reason
    assert "after training started" in reason
