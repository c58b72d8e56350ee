"""The protocol's training-loop half: the init run's exit, add_validation_score on the unwrapped model by every rank,
completion checked before restructured, the marker from rank 0, and a clean end of each generation.

Each check takes the walked Flow and returns Findings; none has side effects.
"""

from __future__ import annotations

import ast

from pai_launch.doctor import api, names
from pai_launch.doctor.checks_exits import is_failure_exit
from pai_launch.doctor.checks_setup import in_ddp
from pai_launch.doctor.env import guarded_candidates, wrapper_kind
from pai_launch.doctor.flow import Event, Flow
from pai_launch.doctor.guards import NOTHING, Meaning
from pai_launch.doctor.model import ERROR, WARNING, Finding
from pai_launch.doctor.never_set import leaving_guard


def check_init_run(flow: Flow) -> list[Finding]:
    found = []
    saves = flow.calls(lambda n: names.is_tracker(n, "save_tracker_settings"))
    if not saves and not flow.calls(lambda n: names.is_training(n, "init_run_done")):
        unseen = api.unseen(flow, "save_tracker_settings")
        found.append(Finding("init-settings-not-saved", WARNING if unseen else ERROR, None,
                             "the init run never calls GPA.pai_tracker.save_tracker_settings(): no array_dims.csv, and "
                             f"initialize_tracker_settings() in every generation stops in pdb.set_trace(){unseen}",
                             "if args.perforate_model_parallel: after the first loss.backward(), "
                             "GPA.pai_tracker.save_tracker_settings(); sys.exit(0)"))
    if saves:
        first = saves[0]
        if not any(e.order > first.order and e.is_exit() and _nested(e.guards, first.guards) for e in flow.events):
            found.append(Finding("init-no-exit", WARNING, first.line,
                                 "the init run does not exit after save_tracker_settings(): it goes on training in "
                                 "one process", "sys.exit(0) right after GPA.pai_tracker.save_tracker_settings()",
                                 path=first.path))
        if not any(e.order < first.order and names.tail(e.name) == "backward" for e in flow.calls(bool)):
            found.append(Finding("init-exit-before-backward", WARNING, first.line,
                                 "save_tracker_settings() runs before any backward pass: the settings it records come "
                                 "from the first backward", "call it right after the first loss.backward()",
                                 path=first.path))
    found.extend(_init_process_group(flow))
    seen = set()
    for event in flow.calls(lambda n: names.is_dist(n, *names.NEEDS_GROUP)):
        if event.node in seen or event.mode.init is not True or event.mode.dist is True:
            continue
        seen.add(event.node)
        found.append(Finding("init-barrier-unguarded", ERROR, event.line,
                             f"{names.tail(event.name)}() runs in the init run, which has no process group "
                             "(RuntimeError: default process group has not been initialized)",
                             "guard it: if args.distributed: ... (or leave it out of the init run)", path=event.path))
    return found


def _nested(exit_guards: tuple, save_guards: tuple) -> bool:
    """Whether an exit is on the save's path: in the same branch, inside it, or just outside the innermost if around
    the save (`if init: if GPA: save(); sys.exit(0)`)."""
    return exit_guards[:len(save_guards)] == save_guards \
        or (save_guards[:len(exit_guards)] == exit_guards and len(save_guards) - len(exit_guards) == 1)


def _init_process_group(flow: Flow) -> list[Finding]:
    """init_process_group where the init run (one plain process, no RANK) gets to it: an error where nothing
    around it could keep the init run out, a warning where a condition doctor cannot read might."""
    found, seen = [], set()
    for event in flow.calls(lambda n: names.is_dist(n, "init_process_group")):
        again = leaving_guard(flow, event)
        mode = event.mode.plus(again.meaning) if again is not None else event.mode
        if event.node in seen or mode.init is False or mode.dist is True:
            continue
        seen.add(event.node)
        explicit = len(event.node.args) > 4 or any(k.arg == "rank" for k in event.node.keywords)
        certain = mode.init is True or (not explicit and event.surely_reached())
        where = "at import time" if event.depth == 0 and not event.guards else "on the init run's path"
        found.append(Finding(
            "init-process-group-unguarded", ERROR if certain else WARNING, event.line,
            f"init_process_group() runs {where}: the init run is one plain process (--perforate_model_parallel, "
            "no torchrun) and dies with \"environment variable RANK expected, but not set\"",
            "guard it: if not args.perforate_model_parallel: dist.init_process_group(...) (or if \"RANK\" in "
            "os.environ:), or use pai_launch.training.start", path=event.path))
    return found


def _model_argument(event: Event) -> ast.AST | None:
    if len(event.node.args) > 1:
        return event.node.args[1]
    return next((k.value for k in event.node.keywords if k.arg in ("net", "model")), None)


def check_validation(flow: Flow) -> list[Finding]:
    found: dict[tuple[str, int], Finding] = {}
    ddp = flow.is_ddp()
    for event in flow.calls(lambda n: names.is_tracker(n, "add_validation_score")):
        argument = _model_argument(event)
        wrapped = _wrapped(argument, event) if argument is not None else None
        if wrapped is not None:
            kind, severity = wrapped
            wrapper = "DistributedDataParallel" if kind == "ddp" else "DataParallel"
            found.setdefault(("validation-score-wrapped-model", event.line), Finding(
                "validation-score-wrapped-model", severity, event.line,
                f"add_validation_score gets the {wrapper} wrapper, not the model: PerforatedAI restructures and "
                "reloads the network it is given" + ("" if severity == ERROR else
                                                     " (where the wrapper is built under a condition doctor cannot "
                                                     "tie to this call)"),
                "pass the unwrapped model: add_validation_score(score, model.module)", path=event.path))
        if not ddp or not in_ddp(event):
            continue
        if event.mode.rank0 is True:
            if not any(e.order > event.order and names.is_broadcast(e.name) for e in flow.calls(bool)):
                found.setdefault(("validation-score-rank0-only", event.line), Finding(
                    "validation-score-rank0-only", ERROR, event.line,
                    "only rank 0 calls add_validation_score and nothing shares restructured/training_complete: the "
                    "other ranks never leave the generation (hang)",
                    "every rank calls it with the same score, or rank 0 broadcasts the two flags "
                    "(dist.broadcast_object_list)", path=event.path))
        elif not flow.taken_in_turn(event):
            found.setdefault(("validation-score-race", event.line), Finding(
                "validation-score-race", WARNING, event.line,
                "every rank calls add_validation_score at once: at a dendrite switch each reads SAVE/best_model.pt "
                "while rank 0 may be rewriting it (rare KeyError)",
                "call it one rank at a time, rank 0 first (a loop over ranks with dist.barrier()), or use "
                "pai_launch.training.add_validation_score(run, score, model)", path=event.path))
    return list(found.values())


def _with_polarity(node: ast.AST, negated: bool = False):
    """Each node of a condition, with whether it stands under a `not`."""
    yield node, negated
    inner = negated != (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not))
    for child in ast.iter_child_nodes(node):
        yield from _with_polarity(child, inner)


def _contradicts(a: Meaning, b: Meaning) -> bool:
    return any(x is not None and y is not None and x != y
               for x, y in ((a.init, b.init), (a.dist, b.dist), (a.rank0, b.rank0)))


def _wrapped(argument: ast.AST, event: Event) -> tuple[str, str] | None:
    """(wrapper kind, severity) when the argument may hold a DDP/DataParallel wrapper at this call. An error where the
    wrapper is built unconditionally or under conditions doctor reads (or this call's own); nothing where its
    condition excludes this call (the same test the other way, `if DP: ... else: score(model)`); else a warning."""
    worst = None
    for value, scope, when in guarded_candidates(argument, event.env):
        kind = wrapper_kind(value, scope)
        if kind is None or (kind == "ddp" and not in_ddp(event)):
            continue
        tests = {(ast.dump(g.node.test), g.positive) for g in event.guards}
        if any((ast.dump(g.node.test), not g.positive) in tests or _contradicts(g.meaning, event.mode) for g in when):
            continue
        certain = all((ast.dump(g.node.test), g.positive) in tests or g.meaning != NOTHING for g in when)
        if worst is None or certain:
            worst = (kind, ERROR if certain else WARNING)
        if certain:
            break
    return worst


def _flag_words(test: ast.AST, result_names: set[str]) -> tuple[bool, bool]:
    """(mentions restructured, holds only when training is complete) for an if's condition: `restructured and not
    training_complete` is about restructured alone."""
    restructured = complete = False
    for node, negated in _with_polarity(test):
        word = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
        low = word.lower()
        restructured |= "restructur" in low or (word, 1) in result_names
        complete |= not negated and ("complete" in low or (word, 2) in result_names)
    return restructured, complete


def _result_names(flow: Flow) -> set:
    """(name, position) of the names `a, restructured, complete = ...add_validation_score(...)` unpacks into."""
    found = set()
    nodes = (node for module in flow.modules for node in ast.walk(module.tree))
    for node in nodes:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple) and len(node.targets[0].elts) == 3:
            if any(isinstance(c, ast.Call) and names.tail(names.dotted(c.func, {})) == "add_validation_score"
                   for c in ast.walk(node.value)):
                for position in (1, 2):
                    element = node.targets[0].elts[position]
                    if isinstance(element, ast.Name):
                        found.add((element.id, position))
    return found


def flag_ifs(flow: Flow) -> tuple[list, list]:
    """The ifs on restructured alone and those on training_complete, each as (if node, first event under it)."""
    result = _result_names(flow)
    restructure, complete, seen = [], [], set()
    for event in flow.events:
        for guard in event.guards:
            if id(guard.node) in seen or not isinstance(guard.node, ast.If):
                continue
            seen.add(id(guard.node))
            on_restructured, on_complete = _flag_words(guard.node.test, result)
            if on_complete:
                complete.append((guard.node, event))
            elif on_restructured:
                restructure.append((guard.node, event))
    return restructure, complete


def _leaving(flow: Flow, node: ast.If) -> list[Event]:
    """The exits and breaks under the if that end the generation (not a failure's sys.exit(1) in a helper, nor a
    break out of a loop the if does not stand in, such as a retry loop inside it: that leaves only the retries)."""
    return [e for e in flow.events if e.under(node) and in_ddp(e) and not is_failure_exit(e)
            and (e.is_exit() or e.kind == "break" and _breaks_around(e, node))]


def _breaks_around(event: Event, node: ast.If) -> bool:
    """Whether the break leaves a loop the if stands in."""
    return bool(event.loops) and any(inner is node for inner in ast.walk(event.loops[-1]))


def check_completion_order(flow: Flow) -> list[Finding]:
    if not flow.is_ddp():
        return []
    restructure, complete = flag_ifs(flow)
    first_complete = min((e.order for _n, e in complete), default=None)
    leaving = [(node, first) for node, first in restructure if _leaving(flow, node)]
    if leaving:
        node, first = leaving[0]
        if first_complete is None or first_complete > first.order:
            return [Finding("restructured-before-complete", ERROR, node.lineno,
                            "restructured is checked (and the generation left) before training_complete: at the end "
                            "both are True, so the run restarts forever instead of finishing",
                            "check training_complete first: if training_complete: ... elif restructured: ...",
                            path=first.path)]
    else:
        rewrapped = flow.calls(names.is_ddp)  # DDP built again in the branch: in process on purpose (checks_rewrap)
        staying = [(n, e) for n, e in restructure if in_ddp(e) and e.under(n)
                   and not any(w.under(n) for w in rewrapped)]
        if staying:
            node, first = staying[0]
            return [Finding("restructure-no-exit", WARNING, node.lineno,
                            "under DDP the ranks go on after a restructure: the DDP wrapper still holds the old "
                            "parameters, and pai-launch expects every rank to exit 0 for the next generation",
                            "on restructured: dist.barrier(); dist.destroy_process_group(); sys.exit(0)",
                            path=first.path)]
    return []


def check_marker(flow: Flow) -> list[Finding]:
    if not flow.is_ddp() or flow.calls(lambda n: names.is_training(n, "mark_complete")):
        return []
    markers = [e for e in flow.events if e.kind == "marker"]
    if not markers:
        return [Finding("marker-missing", ERROR, None,
                        "the script never writes SAVE/.training_complete: pai-launch cannot tell the end of training "
                        "from a generation without progress, and stops with exit code 5",
                        "on training_complete, rank 0 writes it: if rank == 0: open(os.path.join(save, "
                        "'.training_complete'), 'w').write('complete')")]
    return [Finding("marker-every-rank", WARNING, e.line,
                    "every rank writes SAVE/.training_complete, not rank 0 alone (concurrent writes to one file)",
                    "guard the write: if dist.get_rank() == 0:", path=e.path)
            for e in markers if in_ddp(e) and e.mode.rank0 is not True][:1]


def check_generation_end(flow: Flow) -> list[Finding]:
    if not flow.is_ddp():
        return []
    restructure, complete = flag_ifs(flow)
    found = []
    for node, _first in sorted(restructure + complete, key=lambda pair: pair[1].order):
        leaving = _leaving(flow, node)
        if not leaving:
            continue
        last = leaving[0]
        if last.kind == "call" and names.is_generation_end(last.name):
            continue
        before = [e for e in flow.events if e.under(node) and e.order < last.order and in_ddp(e)]
        if last.kind == "break":  # or after the loop it leaves (not code nothing says runs then: detached)
            before += [e for e in flow.events if e.order > last.order and in_ddp(e) and not e.detached]
        called = {e.name for e in before if e.kind == "call"}
        if any(names.is_generation_end(n) for n in called):
            continue
        if not any(names.is_barrier(n) for n in called):
            found.append(Finding("generation-end-barrier", WARNING, last.line,
                                 "a rank leaves the generation without a barrier: it may exit while rank 0 is still "
                                 "writing PerforatedAI's files", "dist.barrier() before the exit", path=last.path))
        if not any(names.is_destroy(n) for n in called):
            found.append(Finding("generation-end-destroy", WARNING, last.line,
                                 "a rank leaves the generation without dist.destroy_process_group() (its exit may "
                                 "hang or report errors)",
                                 "dist.barrier(); dist.destroy_process_group() before the exit", path=last.path))
    return found


CHECKS = (check_init_run, check_validation, check_completion_order, check_marker, check_generation_end)
