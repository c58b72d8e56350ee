"""A launcher failure caused by a lost private temporary folder is a fault a retry can fix, however often it repeats
before training: never "retrying cannot help"; the failure budget still bounds it."""

import os

from pai_launch.agent.main import Output
from pai_launch.core import exitcodes
from pai_launch.core.events import Began, GenerationEnded, InitExited, Tick
from pai_launch.core.failure import Failure
from pai_launch.core.machine import Phase, Policy, start, step
from pai_launch.core.repeats import retry_can_fix
from pai_launch.linux import privatedir
from pai_launch.wire.protocol import REPORTS, GenerationResult

POLICY = Policy(grace=10.0, agent_ahead=False)
LOST = Failure.launcher(f"FileNotFoundError: [Errno 2] No such file or directory ({privatedir.LOST_NOTE}: "
                        f"/tmp/{privatedir.PREFIX}7-abc/pymp-def/listener-ghi)")


def replay(history, policy=POLICY):
    state, emitted = start(save_name="PAI"), []
    for event in [Began(True, 0.0), InitExited(0, wrote_to="PAI"), *history]:
        state, actions = step(policy, state, event)
        emitted.extend(actions)
    return state, emitted


def test_a_lost_private_folder_is_retried_even_when_it_repeats_before_training():
    lost = GenerationEnded(failures=(LOST,), now=0.0)
    state, actions = replay([lost, Tick(5.0), lost])
    assert state.phase is Phase.BACKOFF, actions
    assert not any("retrying cannot help" in getattr(action, "reason", "") for action in actions)


def test_a_lost_private_folder_still_uses_up_the_failure_budget():
    lost = GenerationEnded(failures=(LOST,), now=0.0)
    state, actions = replay([lost, Tick(5.0), lost, Tick(20.0), lost])
    assert state.exit_code == exitcodes.BUDGET_EXHAUSTED, actions


def test_only_the_launchers_own_lost_files_count():
    assert retry_can_fix(LOST)
    assert not retry_can_fix(Failure.launcher("FileNotFoundError: [Errno 2] No such file or directory: 'python9'"))
    assert not retry_can_fix(Failure.worker(0, 1, f"FileNotFoundError ({privatedir.LOST_NOTE}: x)"))


def test_the_agent_names_a_lost_private_path_in_a_launcher_error(tmp_path):
    gone = tmp_path / "pymp-abc"
    read, write = os.pipe()
    try:
        out = Output(write, lambda: (str(tmp_path), str(gone)))
        out.result(GenerationResult(2, error="FileNotFoundError: [Errno 2] No such file or directory"))
        out.result(GenerationResult(3))
        lines = os.read(read, 65536).decode().splitlines()
    finally:
        os.close(read)
        os.close(write)
    noted, clean = (REPORTS.decode(line) for line in lines)
    assert retry_can_fix(Failure.launcher(noted.error)) and str(gone) in noted.error
    assert clean.error is None and clean.generation == 3
