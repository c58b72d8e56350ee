"""How a run begins, as part of the state machine (machine.py dispatches here): with the init run or straight with a
generation, and what the init run's end leads to: the first generation, the end of the run, or adopting the folder
it really wrote to. Pure, like the machine.
"""

from __future__ import annotations

from dataclasses import replace

from pai_launch.core import exitcodes
from pai_launch.core.actions import Action, AdoptSaveFolder
from pai_launch.core.events import AdoptionRefused, Began, InitExited, SaveFolderAdopted
from pai_launch.core.state import Phase, Policy, State, finish, finish_stopping, start_generation, start_init
from pai_launch.wire import failure_causes


def on_began(policy: Policy, state: State, event: Began) -> tuple[State, list[Action]]:
    if state.phase is not Phase.STARTING:
        return state, []
    if event.needs_init:
        return start_init(state, event.now)
    return start_generation(state, event.now)


def on_init_exited(policy: Policy, state: State, event: InitExited) -> tuple[State, list[Action]]:
    if state.phase is Phase.STOPPING:
        return finish_stopping(state)
    if state.phase is not Phase.INIT:
        return state, []
    if event.returncode != 0:
        reason = f"init run failed with {exitcodes.describe_returncode(event.returncode)}"
        return finish(state, exitcodes.INIT_FAILED, reason + failure_causes.summary(event.log_tail))
    if event.wrote_to is None:
        reason = "init run exited 0 but wrote no array_dims.csv: the script must call " \
            "GPA.pai_tracker.save_tracker_settings()"
        return finish(state, exitcodes.INIT_FAILED, reason)
    if event.wrote_to == state.save_name:
        return start_generation(replace(state, init_done=True), event.now)
    if not policy.adopt_save_folder:
        reason = (f"the init run wrote its settings to {event.wrote_to}/, not to --save-name {state.save_name}: "
                  f"pass --save-name {event.wrote_to} (or make the script save to {state.save_name})")
        return finish(state, exitcodes.USAGE, reason)
    return replace(state, phase=Phase.ADOPTING), [AdoptSaveFolder(event.wrote_to)]


def on_adopted(policy: Policy, state: State, event: SaveFolderAdopted) -> tuple[State, list[Action]]:
    if state.phase is not Phase.ADOPTING:
        return state, []
    return start_generation(replace(state, save_name=event.name, init_done=True), event.now)


def on_adoption_refused(policy: Policy, state: State, event: AdoptionRefused) -> tuple[State, list[Action]]:
    if state.phase is not Phase.ADOPTING:
        return state, []
    return finish(state, exitcodes.USAGE, event.reason)
