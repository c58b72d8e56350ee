"""From a valid command line to the runner: the run settled (beforerun.py), then composed: its save session, the dry
run's plan or the world, the job's coordination and the runner."""

from __future__ import annotations

import queue
import sys

from pai_launch.cli import beforerun
from pai_launch.core import exitcodes
from pai_launch.placement.spec import LaunchSpec
from pai_launch.savefmt import savedir
from pai_launch.supervise.job import plan
from pai_launch.supervise.outputs import logs
from pai_launch.wire.errors import LaunchError


def launch_run(spec: LaunchSpec, env: dict[str, str], visible: tuple[str, ...], inbox: queue.SimpleQueue,
               notes: list[tuple[str, dict]] = (), others: frozenset[int] = frozenset(), spawn=None) -> int:
    """The composition root: the run settled (beforerun.settle), its save session, then the dry run's plan, or the
    world, the job's coordination and the runner. `notes`: warnings the run starts with besides the script check's
    (how torchrun's options were read); `others`, `spawn`: the world's (world.make_world), where a test hosts the run
    or plays a history."""
    from pai_launch.supervise.children.coordination import open_job
    from pai_launch.supervise.folder.session import SaveSession
    from pai_launch.supervise.loop.runner import Runner
    from pai_launch.supervise.loop.world import make_world

    log = logs.make_logger(spec.log_format)
    try:
        settled = beforerun.settle(spec, log, notes)
        if isinstance(settled, int):
            return settled
        spec, notes = settled
        session = SaveSession(spec, env)
        if spec.dry_run:
            for event, fields in notes:
                log.warning(event, **fields)
            load = session.save_name if savedir.has_switches(session.save_dir) else None
            for line in plan.describe(spec, session.run_id, visible, env, needs_init=session.needs_init(),
                                      resume_folder=load):
                print(line)
            return exitcodes.COMPLETE
        # Before the job's store: its processes are the run's to sweep.
        world = make_world(spec, env, inbox, others, spawn)
        spec, job = open_job(spec, session, env, inbox)
        return Runner(spec, session, inbox, env, visible, world, job=job, notes=notes).run()
    except LaunchError as exc:
        print(f"pai-launch: error: {exc}", file=sys.stderr)
        return exc.exit_code
