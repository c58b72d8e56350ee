"""The runner in this process, on a real save folder: what happens before the loop's first decision."""

from __future__ import annotations

import json
import os
import queue
import signal
import sys
import tempfile
import time

from pai_launch.core.observations import SignalReceived
from pai_launch.placement.spec import LaunchSpec
from pai_launch.supervise.folder.session import SaveSession
from pai_launch.supervise.loop.runner import Runner
from tests.helpers import FAKE_TRAINER, events_file, json_events
from tests.scripted_world import own_world


def test_a_stop_signal_that_arrived_before_the_loop_began_starts_nothing(tmp_path, monkeypatch, capfd):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the runner makes its private log folder
    records = tmp_path / "records"
    records.mkdir()
    spec = LaunchSpec(script=FAKE_TRAINER, workdir=tmp_path, python=sys.executable, nproc=2, log_format="json",
                      script_args=("--record", str(records)))
    env = {key: value for key, value in os.environ.items() if not key.startswith("PAI_LAUNCH_")}
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    inbox.put(SignalReceived(signal.SIGTERM, time.monotonic()))  # as the handler queues one during start-up

    rc = Runner(spec, SaveSession(spec, env), inbox, env, (), own_world(spec, env, inbox)).run()

    assert rc == 143
    assert list(records.iterdir()) == []  # neither the init run nor a worker was started
    events = json_events(capfd.readouterr().err)
    assert [e["event"] for e in events] == ["run_started", "signal_received", "run_finished"]
    assert events[-1]["reason"] == "stopped by SIGTERM before anything was started"
    # The init run never ran, so no folder was made where the script may never write.
    assert sorted(os.listdir(tmp_path)) == ["records"]


def test_a_stop_before_anything_started_is_recorded_in_a_save_folder_the_script_made(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    (tmp_path / "PAI").mkdir()
    (tmp_path / "PAI" / "array_dims.csv").write_text(".fc1,1,32\n")  # an init run's output, no switch file: init runs
    spec = LaunchSpec(script=FAKE_TRAINER, workdir=tmp_path, python=sys.executable, nproc=2, log_format="json")
    env = {key: value for key, value in os.environ.items() if not key.startswith("PAI_LAUNCH_")}
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    inbox.put(SignalReceived(signal.SIGTERM, time.monotonic()))

    assert Runner(spec, SaveSession(spec, env), inbox, env, (), own_world(spec, env, inbox)).run() == 143

    events = events_file(tmp_path / "PAI" / ".pai-launch" / "events.jsonl")
    assert [event["event"] for event in events] == ["run_started", "signal_received", "run_finished"]
    state = json.loads((tmp_path / "PAI" / ".pai-launch" / "state.json").read_text())
    assert state["last_exit"] == {"code": 143, "reason": "stopped by SIGTERM before anything was started"}
    assert not list(tmp_path.glob("pai-launch-logs-*"))  # the private log folder went with the run


def test_every_action_the_machine_can_ask_for_has_one_effect_in_the_table():
    """The loop dispatches through one typed table of effects, complete for the Action union; a table without one
    is named (the check that runs when the module is imported)."""
    from typing import get_args

    from pai_launch.core.actions import Action, ReportStall
    from pai_launch.supervise.loop import effects

    assert set(effects.EFFECTS) == set(get_args(Action))
    assert effects.missing_effects() == []
    partial = {kind: effect for kind, effect in effects.EFFECTS.items() if kind is not ReportStall}
    assert effects.missing_effects(partial) == ["ReportStall"]


def test_every_report_of_the_threads_is_translated_or_already_an_event_of_the_machine():
    """The translator dispatches through one table: an observation the table lacks must be one the machine takes as
    it is, or it would reach the machine as an event it has no rule for."""
    from typing import get_args

    from pai_launch.core.events import Event
    from pai_launch.core.observations import Observation
    from pai_launch.supervise.loop.translator import TRANSLATIONS

    untranslated = set(get_args(Observation)) - set(TRANSLATIONS)
    assert untranslated <= set(get_args(Event)), sorted(kind.__name__ for kind in untranslated - set(get_args(Event)))
    assert all(callable(translate) for translate in TRANSLATIONS.values())


def test_a_pause_that_falls_within_the_loops_housekeeping_is_still_a_pause(tmp_path, monkeypatch):
    # SIGSTOP can land while the loop scans the process tree. The pause must count from the last tick, or the next
    # Tick comes with the agent's silence and the save folder's quiet grown by the pause: a false hung agent or stall.
    from pai_launch.core.events import Resumed, Tick
    from pai_launch.supervise.loop import runner as runner_module

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    spec = LaunchSpec(script=FAKE_TRAINER, workdir=tmp_path, python=sys.executable, nproc=2, log_format="json")
    env = {key: value for key, value in os.environ.items() if not key.startswith("PAI_LAUNCH_")}
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    runner = Runner(spec, SaveSession(spec, env), inbox, env, (), own_world(spec, env, inbox))
    clock = [1000.0]
    monkeypatch.setattr(runner_module, "time", type("Clock", (), {"monotonic": staticmethod(lambda: clock[0])}))
    pause = runner_module.PAUSED_AFTER + 2.0
    housekept: list[float] = []

    def housekeeping() -> None:
        housekept.append(clock[0])
        clock[0] += pause if len(housekept) == 2 else 0.01

    monkeypatch.setattr(runner, "housekeeping", housekeeping)
    monkeypatch.setattr(runner, "resumed", lambda now, paused: Resumed(now, paused, None))

    first = runner.next_event()
    clock[0] += runner_module.TICK
    second = runner.next_event()

    assert isinstance(first, Tick) and len(housekept) == 2
    assert isinstance(second, Resumed), second
    assert second.paused >= pause and second.now == clock[0]
