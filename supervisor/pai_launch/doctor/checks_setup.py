"""The protocol's start-up half: the two flags, prompt-free settings, perforate_model in turn, the resume load before
the optimizer, the tracker's optimizer, and
DistributedDataParallel's flags.

Each check takes the walked Flow and returns Findings; none has side effects.
"""

from __future__ import annotations

import ast

from pai_launch.doctor import api, names, tracker_use
from pai_launch.doctor.env import candidates, wrapper_kind
from pai_launch.doctor.flow import Event, Flow
from pai_launch.doctor.model import ERROR, WARNING, Finding

FLAGS = (("--perforate_model_parallel", "flag-perforate-model-parallel",
          "the init run: pai-launch starts it as `python SCRIPT --perforate_model_parallel`",
          'parser.add_argument("--perforate_model_parallel", action="store_true")'),
         ("--pai_load_folder", "flag-pai-load-folder",
          "every resumed generation gets `--pai_load_folder SAVE`",
          'parser.add_argument("--pai_load_folder", default=None)'))

PROMPTS = (("configuration_confirmed", "prompt-configuration-confirmed", ERROR,
            "perforate_model opens a terminal UI (and fails without a TTY or on any rank but 0)"),
           ("unwrapped_modules_confirmed", "prompt-unwrapped-modules", WARNING,
            "PerforatedAI stops in pdb.set_trace() when a module with parameters is left unwrapped"))
# No weight-decay prompt: perforatedai 3.2.9 accepts weight decay by default (GPA.pc.get_weight_decay_accepted() is
# True; an optimizer with weight decay gets a logged recommendation, never pdb), so it stops no run.


def in_ddp(event: Event) -> bool:
    """The event can happen in a DDP generation (not only in the init run or a single process)."""
    mode = event.mode
    return mode.init is not True and mode.dist is not False


def _accepts(flow: Flow, flag: str) -> bool:
    return any(s == flag or s.startswith(flag + "=") for s in flow.strings)


def check_flags(flow: Flow) -> list[Finding]:
    found = []
    for flag, ident, why, fix in FLAGS:
        if _accepts(flow, flag):
            continue
        hyphens = flag.replace("_", "-")
        if _accepts(flow, hyphens):
            found.append(Finding(ident, ERROR, None, f"the script spells the option {hyphens}: {why}, and argparse "
                                 f"does not read {flag} as {hyphens} (unrecognized arguments, exit 2)",
                                 f'add the underscore spelling: parser.add_argument("{hyphens}", "{flag}", ...)'))
        elif reads_no_options(flow):
            found.append(Finding(ident, ERROR, None, f"the script reads no command-line options (no argparse, no "
                                 f"sys.argv): {why}, and it ignores {flag}, so it never learns which run it is",
                                 f"parse the options with argparse and {fix}"))
        else:
            found.append(Finding(ident, ERROR, None, f"the script does not accept {flag}: {why}, and argparse "
                                 "exits 2 on an unknown option", f"add {fix}"))
    return found


#: libraries that read the command line themselves (an import of one means the script may read options)
OPTION_LIBRARIES = frozenset({"argparse", "optparse", "getopt", "click", "typer", "fire", "hydra", "absl", "docopt",
                              "jsonargparse", "simple_parsing", "tyro", "omegaconf"})
OPTION_CLASSES = ("HfArgumentParser", "LightningCLI")


def reads_no_options(flow: Flow) -> bool:
    """Whether no file read looks at sys.argv or imports a library that reads the command line: then pai-launch's
    flags are silently ignored rather than rejected."""
    for module in flow.modules:
        paths = module.imports.values()
        if any(path.split(".")[0] in OPTION_LIBRARIES or names.tail(path) in OPTION_CLASSES for path in paths):
            return False
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Attribute) and node.attr == "argv" \
                    and names.dotted(node, module.imports) == "sys.argv":
                return False
    return True


def check_prompts(flow: Flow) -> list[Finding]:
    perforates = perforate_calls(flow)
    if not perforates or flow.calls(lambda n: names.is_training(n, "configure_without_prompts")):
        return []
    first = perforates[0]
    found = []
    for setting, ident, severity, why in PROMPTS:
        setters = [e for e in flow.events if _sets(e, setting)]
        setter = f"GPA.pc.set_{setting}(True)"
        if not setters:
            unseen = api.unseen(flow, "set_" + setting)
            found.append(Finding(ident, WARNING if unseen else severity, None,
                                 f"{setter} is never called: {why}{unseen}",
                                 f"call {setter} before UPA.perforate_model"))
        elif all(e.order > first.order for e in setters):
            found.append(Finding(ident, severity, setters[0].line,
                                 f"{setter} comes after perforate_model (line {first.line}): {why}",
                                 f"move {setter} before UPA.perforate_model", path=setters[0].path))
    return found


def perforate_calls(flow: Flow) -> list[Event]:
    return flow.calls(lambda n: names.is_perforate(n) or names.is_training(n, "perforate_model"))


def _sets(event: Event, setting: str) -> bool:
    if event.kind == "assign":
        return bool(event.name) and event.name.startswith(names.GLOBALS) and event.name.endswith(setting)
    if event.kind != "call" or not names.is_pc_setter(event.name, setting):
        return False
    args = event.node.args
    return not (args and isinstance(args[0], ast.Constant) and args[0].value is False)


def check_perforate_in_turn(flow: Flow) -> list[Finding]:
    """One finding per race a run meets: a call in the other branch of an if/else (only one of them runs), or
    repeated in a loop after it (perforating again a model the start-up already perforated), is named in the first
    call's finding."""
    if not flow.is_ddp():
        return []
    racing: dict[ast.AST, tuple[Event, list[tuple[Event, str]]]] = {}
    for event in flow.calls(names.is_perforate):
        if event.node in racing or not in_ddp(event) or event.mode.rank0 is True or flow.taken_in_turn(event):
            continue
        same = next(((first, why) for first, _also in racing.values() if (why := _same_race(event, first))), None)
        if same is not None:
            racing[same[0].node][1].append((event, same[1]))
        else:
            racing[event.node] = (event, [])
    found = []
    for event, also in racing.values():
        more = "".join(f"; the same race at {f'line {e.line}' if e.path == event.path else f'{e.path}:{e.line}'} "
                       f"({why})" for e, why in also)
        found.append(Finding(
            "perforate-model-race", ERROR, event.line,
            "every rank calls UPA.perforate_model at once: each rewrites SAVE/<save>_config.json while the "
            f"others read it (JSONDecodeError at start-up){more}",
            "call it one rank at a time (for r in range(world): if r == rank: perforate; dist.barrier()), "
            "or use pai_launch.training.perforate_model(run, model, ...)", path=event.path))
    return found


def _same_race(event: Event, first: Event) -> str | None:
    """Why the call is the race `first` already is, or None: it is in the other branch of an if/else `first` is in,
    or comes after it inside a loop `first` is not in (the training loop perforating again)."""
    if first.order >= event.order:
        return None
    if any(g.node is h.node and g.positive != h.positive and not (g.leaves or h.leaves)
           for g in first.guards for h in event.guards):
        return "the other branch of its if"
    if any(all(loop is not held for held in first.loops) for loop in event.loops):
        return "again in a loop after it"
    return None


def check_resume(flow: Flow) -> list[Finding]:
    loads = flow.calls(lambda n: names.is_load(n) or names.is_training(n, "load_newest"))
    optimizers = flow.calls(lambda n: names.is_tracker(n, "setup_optimizer"))
    if not loads:
        if not flow.is_ddp():
            return []
        return [Finding("resume-missing", ERROR, None,
                        "nothing loads the newest switch_N.pt from --pai_load_folder: every generation starts over, "
                        "restructures at the same point and the run never ends",
                        "when args.pai_load_folder is set, model = UPA.load_system(model, args.pai_load_folder, "
                        "'switch_N', True) before the optimizer is built")]
    if optimizers and optimizers[0].order < loads[0].order:
        return [Finding("load-after-optimizer", WARNING, loads[0].line,
                        f"the checkpoint is loaded after the optimizer is built (line {optimizers[0].line}): the "
                        "optimizer steps the parameters from before the load, not the loaded dendrites",
                        "load the switch checkpoint first, then call GPA.pai_tracker.setup_optimizer",
                        path=loads[0].path)]
    return []


def check_optimizer(flow: Flow) -> list[Finding]:
    if flow.calls(lambda n: names.is_tracker(n, "setup_optimizer") or names.is_tracker(n, "set_optimizer_instance")) \
            or not tracker_use.reaches_tracker(flow):
        return []
    plain = flow.calls(names.is_torch_optimizer)
    first = tracker_use.running(plain)
    where = f" ({names.tail(first.name)} is built directly)" if first else ""
    unseen = api.unseen(flow, "setup_optimizer", "set_optimizer_instance")
    return [Finding("optimizer-not-from-tracker", WARNING if unseen else ERROR, first.line if first else None,
                    f"the optimizer is not built by GPA.pai_tracker.setup_optimizer{where}: the tracker has no "
                    f"optimizer to reset when it adds dendrites{unseen}",
                    "GPA.pai_tracker.set_optimizer(torch.optim.X); optimizer, scheduler = "
                    "GPA.pai_tracker.setup_optimizer(model, optim_args, sched_args)",
                    path=first.path if first else None)]


#: DistributedDataParallel's parameters by position (torch 2.x).
DDP_POSITION = {"broadcast_buffers": 4, "find_unused_parameters": 8}


def _flag(event: Event, keyword: str) -> bool | None:
    """The bool passed for `keyword` (False when left out: both default so), or None when it cannot be read."""
    call = event.node
    value = next((k.value for k in call.keywords if k.arg == keyword), None)
    if value is None and len(call.args) > DDP_POSITION[keyword]:
        value = call.args[DDP_POSITION[keyword]]
    if value is None:
        for splat in (k.value for k in call.keywords if k.arg is None):
            value = _from_dict(splat, event, keyword)
            if value is None:
                return None
        if value is None:
            return True if keyword == "broadcast_buffers" else False
    for candidate, _scope in candidates(value, event.env):
        if isinstance(candidate, ast.Constant) and isinstance(candidate.value, bool):
            return candidate.value
    return None


def _from_dict(splat: ast.AST, event: Event, keyword: str) -> ast.AST | None:
    for candidate, _scope in candidates(splat, event.env):
        if isinstance(candidate, ast.Dict):
            for key, value in zip(candidate.keys, candidate.values):
                if isinstance(key, ast.Constant) and key.value == keyword:
                    return value
            return ast.Constant(True if keyword == "broadcast_buffers" else False)
        if isinstance(candidate, ast.Call) and isinstance(candidate.func, ast.Name) and candidate.func.id == "dict":
            value = next((k.value for k in candidate.keywords if k.arg == keyword), None)
            return value if value is not None else ast.Constant(keyword == "broadcast_buffers")
    return None


def check_ddp_flags(flow: Flow) -> list[Finding]:
    found, seen = [], set()
    for event in flow.calls(names.is_ddp):
        if event.node in seen:
            continue
        seen.add(event.node)
        if _flag(event, "find_unused_parameters") is False:
            found.append(Finding("ddp-find-unused-parameters", ERROR, event.line,
                                 "DistributedDataParallel is built without find_unused_parameters=True: PerforatedAI "
                                 "leaves parameters out of the graph and DDP's reducer raises on the next step",
                                 "DistributedDataParallel(model, ..., find_unused_parameters=True, "
                                 "broadcast_buffers=False)", path=event.path))
        if _flag(event, "broadcast_buffers") is True and not any(k.arg == "forward_sync_buffers"
                                                                 for k in event.node.keywords):
            found.append(Finding("ddp-broadcast-buffers", ERROR, event.line,
                                 "DistributedDataParallel broadcasts buffers (broadcast_buffers=True is the default): "
                                 "PerforatedAI's tracker buffer differs in length per rank and gloo/nccl abort with a "
                                 "size mismatch", "pass broadcast_buffers=False (and find_unused_parameters=True)",
                                 path=event.path))
    return found


def check_wrapper_discarded(flow: Flow) -> list[Finding]:
    """`model = DDP(model); model = model.module` before any training: the wrapper is gone, so no gradient sync. A
    warning: the run trains wrongly, it does not crash."""
    found = []
    wraps = flow.calls(names.is_ddp)
    for event in (e for e in flow.events if e.kind == "unwrap"):
        source = event.node.value.value
        if not (isinstance(source, ast.Name) and source.id == event.name or isinstance(source, ast.Call)):
            continue
        if wrapper_kind(source, event.env) != "ddp":
            continue
        built = max((w for w in wraps if w.order < event.order), key=lambda w: w.order, default=None)
        if built is not None and built.loops != event.loops:
            continue  # unwrapped after the loop that wraps it (to save or score it)
        since = built.order if built is not None else -1
        if any(since < e.order < event.order and names.tail(e.name) == "backward" for e in flow.calls(bool)):
            continue  # unwrapped after training, not instead of it
        found.append(Finding("ddp-wrapper-discarded", WARNING, event.line,
                             f"{event.name} = {ast.unparse(event.node.value)} throws the DistributedDataParallel "
                             "wrapper away right after it is built: the ranks train without gradient sync, their "
                             "weights (and the dendrites added from them) drift apart",
                             f"keep the wrapper for training (ddp_model = DistributedDataParallel(...)) and use "
                             f"{ast.unparse(event.node.value)} only where the unwrapped model is needed",
                             path=event.path))
    return found


CHECKS = (check_flags, check_prompts, check_perforate_in_turn, check_resume,
          check_optimizer, check_ddp_flags, check_wrapper_discarded)
