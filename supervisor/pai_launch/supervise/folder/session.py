"""Everything pai-launch does under the save folder: its record, lock and events file (written only once the init run
has shown where the script saves), where the init run really wrote, adoption of that folder and its record beside the
default one, checkpoint checks before a launch and progress after one (the checks are generation_files.py's), the
folder's health and watching it (its faults in words, and --fresh's move aside, are savefolder.py's). Files only.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from pai_launch.core.state import Phase, State
from pai_launch.placement.spec import IN_PROCESS, LaunchSpec
from pai_launch.savefmt import adoptions, checkpoint, safeopen, savedir, statedir
from pai_launch.savefmt.locks import SaveFolderLock
from pai_launch.savefmt.record import (
    RECORDS_FOLDER,
    STATE_DIR,
    RecordStore,
    RunRecord,
    StateError,
    carried_history,
    fingerprint,
    fingerprint_differences,
)
from pai_launch.supervise.folder.generation_files import FolderAtEnd, read_at_end, resume_choice
from pai_launch.supervise.folder.savefolder import SaveFolderError, folder_error, folder_identity, removed_message
from pai_launch.supervise.folder.watcher import SaveFolderWatcher
from pai_launch.supervise.job import plan
from pai_launch.supervise.outputs.logs import EventsFile


class SaveSession:
    """One run's save folder. Reading is free (a dry run builds one); acquire() takes the folder."""

    def __init__(self, spec: LaunchSpec, env: Mapping[str, str]) -> None:
        self.spec = spec
        statedir.check(spec.save_dir)  # another user's folder, or a link, is refused before anything in it is read
        self.store = RecordStore(spec.save_dir)
        self.fingerprint = fingerprint(spec.workdir / spec.script, spec.script_args, spec.nproc)
        # StateError: a state.json that cannot be trusted (moved aside by node 0, and not in a dry run)
        self.previous = self.store.load(move_bad=spec.nodes.node_rank == 0 and not spec.dry_run)
        if self.previous is not None and self.previous.fingerprint != self.fingerprint:
            changes = "; ".join(fingerprint_differences(self.previous.fingerprint, self.fingerprint))
            raise StateError(
                f"{spec.save_dir} holds a run of another command ({changes}): run the same command to resume it, "
                f"or add --fresh to move {spec.save_name} aside and start over"
            )
        previous_id = self.previous.run_id if self.previous else None
        self.run_id = env.get(plan.RUN_ID_ENV) or previous_id or plan.new_run_id(dict(env))
        # The record lives in the folder it describes: its save_name is never taken as a path.
        self.save_name = spec.save_name
        #: Node 0 writes state.json and quarantines torn files; the other nodes of a job only read the folder.
        self.node = spec.nodes.node_rank
        self.lock = SaveFolderLock(self.save_dir, self.node)
        self.events: EventsFile | None = None
        self.folder_identity: tuple[int, int] | None = None
        self._written: RunRecord | None = None
        self._last_exit = self.previous.last_exit if self.previous else None
        self.history = carried_history(self.previous)  # earlier invocations on this folder (state.json's history)
        self._init_started = 0.0
        self._switches_before: savedir.SwitchSnapshot = {}
        self._watcher: SaveFolderWatcher | None = None
        #: The switch file the current generation was started from (--pai_load_folder's newest), if any.
        self.loaded_switch: str | None = None
        self.records: Path | None = None  # where rank 0 records in-process restructures (watched; told to workers)

    @property
    def save_dir(self) -> Path:
        return self.spec.workdir / self.save_name

    def carried_over(self) -> dict:
        """What the state machine starts from on a resume: the previous pai-launch's counters, but not its failure count
        (each invocation has a budget of its own; state.json's history keeps the earlier ones)."""
        prev = self.previous
        return dict(save_name=self.save_name, generation=prev.generation if prev else 0,
                    init_done=prev.init_done if prev else False, last_switch=prev.last_switch if prev else None)

    def events_path(self) -> Path:
        name = self.store.events_path.name if self.node == 0 else f"events.node{self.node}.jsonl"
        return self.store.folder / name

    def join_job(self, run_id: str) -> None:
        """A node other than 0 takes node 0's run id (every worker of the job gets the same PAI_LAUNCH_RUN_ID)."""
        self.run_id = run_id

    def needs_init(self) -> bool:
        if self.node != 0:
            return False  # node 0 runs it; this node waits for its outputs in the shared folder
        if self.spec.reinit or not savedir.has_init_outputs(self.save_dir):
            return True
        return not ((self.previous is not None and self.previous.init_done) or savedir.has_switches(self.save_dir))

    def acquire(self, *, defer: bool = False) -> None:
        """Take the folder (StateError when another pai-launch holds it, or it cannot be used) and open its events file.

        `defer`: an init run comes first, and may save elsewhere or remove the folder to start afresh; only the path
        lock (never in the folder) is taken now, and nothing is written until take() once the init run is over."""
        try:
            self.lock.acquire(write=not defer)
            if defer:
                self.events = EventsFile(None)
                return
            self.folder_identity = folder_identity(self.save_dir)
            self.events = EventsFile(self.events_path())
        except OSError as exc:
            self.lock.release()
            raise StateError(folder_error(self.save_dir, exc)) from exc

    def take(self, *, again: bool = False, during: str | None = None) -> str | None:
        """Make our files (lock, events so far) in the folder the script made, once the init run is over; `again`: also
        in a folder that took the place of ours (the init run removed and wrote it, or the run ends in it). No-op when
        taken; the problem when it cannot be done, `during` naming what ran meanwhile."""
        if self.folder_identity is not None and not (again and self.replaced()):
            return None  # taken; a removal is problem()'s to report
        if not self.save_dir.is_dir():  # never made by us: a folder the script does not write stays absent
            return removed_message(self.save_dir, during, remade=False)
        try:
            self.lock.write()
            self.folder_identity = folder_identity(self.save_dir)
            self._written = None
            if self.events is not None:
                self.events.place(self.events_path())
        except safeopen.WrongKind as exc:
            return f"cannot take the save folder {self.save_dir}: {exc}"
        except (OSError, StateError) as exc:
            return f"cannot take the save folder {self.save_dir}: {getattr(exc, 'strerror', None) or exc}"
        return None

    # --- the record -----------------------------------------------------------------------------------
    def record(self, state: State) -> str | None:
        """Write state.json when what it records of `state` changed; the problem when it cannot be written."""
        if self.node != 0:
            return None  # only node 0 writes the job's record
        if (self.folder_identity is None or self.replaced()) and not (state.phase is Phase.DONE and self._ends_here()):
            return None  # not taken yet (an init run runs), or our folder was removed
        if state.phase is Phase.DONE:
            self._last_exit = {"code": state.exit_code, "reason": state.reason}
        elif state.phase is Phase.BACKOFF:
            self._last_exit = {"code": None, "reason": state.reason}
        record = RunRecord(fingerprint=self.fingerprint, run_id=self.run_id, save_name=state.save_name,
                           generation=state.generation, failures=state.failures, init_done=state.init_done,
                           last_switch=state.last_switch, last_exit=self._last_exit, history=self.history)
        if record == self._written:
            return None
        try:
            self.store.save(dataclasses.replace(record))
        except OSError as exc:
            return f"cannot write {self.store.state_path}: {exc.strerror or exc}"
        self._written = record
        return None

    def _ends_here(self) -> bool:
        """The run ends and its record can go into the folder under its name: one the script wrote (removed and made
        again, or never taken because the run ended in or just after the init run). An empty folder someone else made
        in place of ours is left alone, and a folder that is not there is not made."""
        try:
            script_files = [name for name in os.listdir(self.save_dir) if name != STATE_DIR]
        except OSError:
            return False
        return bool(script_files) and self.take(again=True) is None

    # --- health ---------------------------------------------------------------------------------------
    def replaced(self) -> bool:
        """The folder we took is gone, even if a new folder of that name took its place (PerforatedAI's next
        save re-creates a removed save folder within moments)."""
        return self.folder_identity is not None and folder_identity(self.save_dir) != self.folder_identity

    def problem(self, during: str | None = None) -> str | None:
        """Why the folder cannot take the next write; `during`: what ran meanwhile ("the init run", "generation 2"),
        named when the folder was removed."""
        remade = self.save_dir.is_dir()
        if remade and not self.replaced():
            return savedir.health_problem(self.save_dir)
        return removed_message(self.save_dir, during, remade)

    # --- the init run ---------------------------------------------------------------------------------
    def init_starting(self) -> None:
        self._init_started = time.time()

    def init_wrote_to(self) -> str | None:
        """Where the init run saved its settings: the save folder's name, another folder's, or None."""
        since = self._init_started - 1.0
        output = self.save_dir / savedir.INIT_OUTPUT
        if output.is_file() and output.stat().st_mtime >= since:
            return self.save_name
        found = [folder for folder in savedir.find_init_outputs(self.spec.workdir, since) if folder != self.save_dir]
        return os.path.relpath(found[-1], self.spec.workdir) if found else None

    def adopt(self, name: str) -> None:
        """Move our lock and events into `name`, the folder the script really uses, and drop what we made for them in
        the other (when we had taken it). StateError: another pai-launch holds `name`; SaveFolderError: no access."""
        old_dir, old_store, old_lock, had = self.save_dir, self.store, self.lock, self.folder_identity is not None
        new_dir = self.spec.workdir / name
        lock = SaveFolderLock(new_dir)
        try:
            lock.acquire()
        except OSError as exc:
            raise SaveFolderError(f"cannot take the folder {new_dir} the script saves to: "
                                  f"{exc.strerror or exc}") from exc
        self.save_name, self.store, self.lock = name, RecordStore(new_dir), lock
        self.folder_identity = folder_identity(new_dir)
        self._written = None
        if self.events is not None:
            try:
                self.events.place(self.events_path())
            except OSError as exc:
                raise SaveFolderError(f"cannot move {old_store.events_path} into {new_dir}: "
                                      f"{exc.strerror or exc}") from exc
        old_lock.release()
        if not had:
            return  # nothing of ours was ever written there
        for leftover in (old_store.state_path, old_lock.path):
            leftover.unlink(missing_ok=True)
        for folder in (old_store.folder, old_dir):
            try:
                folder.rmdir()  # only if empty: it was made by us for our state
            except OSError:
                break

    def remember_adoption(self) -> str | None:
        """Record the adopted folder beside the default one, so the same command finds it again; the problem when the
        record cannot be written (the run goes on)."""
        try:
            adoptions.remember(self.spec.workdir, self.spec.adoption(self.save_name, self.run_id))
        except (OSError, StateError) as exc:
            return str(getattr(exc, "strerror", None) or exc)
        return None

    # --- generations ----------------------------------------------------------------------------------
    def resume_folder(self, on_quarantine: Callable[[str, str, Path], None]) -> str | None:
        """--pai_load_folder's value (generation_files.resume_choice), remembering the switch file it loads."""
        latest = self.spec.resume_from == "latest"
        folder, self.loaded_switch = resume_choice(self.save_dir, self.save_name, latest=latest, node=self.node,
                                                   on_quarantine=on_quarantine)
        return folder

    def set_aside(self, name: str, why: str, on_quarantine: Callable[[str, str, Path], None]) -> None:
        """Move the switch file `name` into quarantine (never deleted), when it is still the newest; SaveFolderError
        when it cannot be moved. Only node 0 moves anything."""
        if self.node != 0 or savedir.newest_switch(self.save_dir) != name:
            return
        try:
            moved = checkpoint.quarantine(self.save_dir, name)
        except (OSError, StateError) as exc:
            raise SaveFolderError(f"cannot move {name} aside in {self.save_dir}: "
                                  f"{getattr(exc, 'strerror', None) or exc}") from exc
        on_quarantine(name, why, moved)

    def generation_starting(self) -> None:
        self._switches_before = savedir.snapshot_switches(self.save_dir)

    def progress(self) -> tuple[str, ...]:
        """switch_*.pt files written or rewritten since the generation started."""
        return tuple(savedir.changed_switches(self._switches_before, savedir.snapshot_switches(self.save_dir)))

    def complete(self) -> bool:
        return savedir.marker_mtime(self.save_dir) is not None

    def at_generation_end(self) -> FolderAtEnd:
        """The save folder as the generation that just ended left it, read once (generation_files.read_at_end)."""
        return read_at_end(self.save_dir, self.progress(), node=self.node, loaded_switch=self.loaded_switch)

    def _records_dir(self) -> Path | None:
        """SAVE/.pai-launch/restructures (made if absent) for rank 0's records of in-process restructures; None in
        restart mode, or where a link or another user's folder stands there (then only switch files are seen)."""
        if self.spec.restructure == IN_PROCESS and not self.spec.data_parallel:
            try:
                return statedir.subfolder(self.save_dir, RECORDS_FOLDER)
            except (OSError, StateError):
                pass
        return None

    def watch(self, report: Callable[[object], None]) -> None:
        """Watch the folder (once): writes, the marker and in-process restructures' records reach `report`."""
        if self._watcher is None and self.save_dir.is_dir():
            self.records = self._records_dir()
            poll = self.spec.poll or self.spec.nodes.multi  # inotify never sees other machines' writes: they poll
            self._watcher = SaveFolderWatcher(self.save_dir, report, poll=poll, records=self.records)
            self._watcher.start()

    def close(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        if self.events is not None:
            self.events.close()
        self.lock.release()
