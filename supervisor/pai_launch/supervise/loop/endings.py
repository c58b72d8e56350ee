"""How the init run and each generation ended, said. The init run: its exit, and a failure's output tail unless a stop
was asked for. A generation: the dendrite verdict where it wrote switch files (dendrites_added or
dendrites_rejected, from the run's one dendrite count, which systemd's STATUS= and `pai-launch status` show too), the
line that says it ended, failed or was stopped (core.reports.generation_end), and the failing rank's log tail. The
machine announces the end (ReportGenerationEnd); a switch file seen late, while a shared folder settles, gets its
verdict here too."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pai_launch.core.actions import ReportGenerationEnd, ReportInitEnd
from pai_launch.core.exitcodes import describe_returncode
from pai_launch.core.reports import dendrite_verdict, generation_end
from pai_launch.placement.spec import IN_PROCESS
from pai_launch.savefmt.pai_files import folder_facts
from pai_launch.supervise.outputs.notify import Notifier
from pai_launch.wire import failure_causes, log_events


class Endings:
    def __init__(self, save_dir: Callable[[], Path], restructure: str, log, notifier: Notifier) -> None:
        """`save_dir`: where the save folder is now (adoption may move it); `restructure`: --restructure."""
        self.save_dir, self.restructure, self.log, self.notifier = save_dir, restructure, log, notifier
        #: Dendrites in the model as last said (a resume starts from the folder's count).
        self.dendrites = folder_facts(save_dir())[0]
        #: --restructure in-process, yet a generation ended at a restructure: said once.
        self.restarts_noted = False

    def say_init(self, report: ReportInitEnd) -> None:
        code, stopped = report.event.returncode, {"stopped_by": report.stopped_by} if report.stopped_by else {}
        log = self.log.info if code == 0 or stopped else self.log.error
        log(log_events.INIT_EXITED, exit=describe_returncode(code), duration_s=report.duration, **stopped)
        if code != 0 and not stopped:
            tail = report.event.log_tail
            self.log.error(log_events.INIT_OUTPUT_TAIL, tail=tail, **failure_causes.fields(tail))

    def say(self, report: ReportGenerationEnd) -> None:
        event = report.event
        if event.progressed:
            self.judge(report.generation, event.dendrites, event.progressed)
            self.note_restarts(report)
        name, fields = generation_end(report)
        if name == log_events.GENERATION_STOPPED:  # asked for: no failure, no log tail; a rank's own crash is a warning
            (self.log.warning if "rank" in fields else self.log.info)(name, **fields)
            return
        failed = name == log_events.GENERATION_FAILED
        (self.log.error if failed else self.log.warning if event.failures else self.log.info)(name, **fields)
        if failed and event.failures and event.failures[0].log_tail:
            first = event.failures[0]
            where = {} if first.node is None else {"node": first.node, "host": first.host}
            self.log.error(log_events.WORKER_LOG_TAIL, rank=first.rank, **where, tail=first.log_tail,
                           log_line=failure_causes.explaining_line(first.log_tail)[:500])

    def judge(self, generation: int, dendrites: int | None, progressed: tuple[str, ...]) -> None:
        """The verdict on `generation`, which wrote `progressed` (`dendrites`: the count its end brought, else read
        from the folder), said once."""
        after = dendrites if dendrites is not None else folder_facts(self.save_dir())[0]
        name, fields = dendrite_verdict(generation, self.dendrites, after, progressed)
        self.dendrites = after
        self.log.info(name, **fields)
        verdict = "dendrites added" if name == log_events.DENDRITES_ADDED else "dendrites rejected"
        self.notifier.status(f"generation {generation} ended: {verdict}, {after} in all")

    def note_restarts(self, report: ReportGenerationEnd) -> None:
        """--restructure in-process, but the workers exited at a restructure (the script never calls
        training.after_restructure): the run goes on as restarts, and says so once."""
        event = report.event
        if self.restructure != IN_PROCESS or self.restarts_noted or event.failures or event.complete:
            return
        self.restarts_noted = True
        self.log.warning(log_events.IN_PROCESS_UNUSED, generation=report.generation,
                         switch_files=list(event.progressed),
                         hint="the workers exited at a restructure, so the run goes on restarting them each time, as "
                              "--restructure restart does: call pai_launch.training.after_restructure(run, net, model, "
                              "optimizer, build_optimizer) where PerforatedAI restructures, or drop --restructure "
                              "in-process")
        self.notifier.status(f"generation {report.generation} ended at a restructure: restarting (the script does not "
                             "restructure in process)")
