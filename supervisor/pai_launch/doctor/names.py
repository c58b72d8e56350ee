"""Dotted names for what a script calls, whatever its import aliases, and which of them the protocol cares about.

`import perforatedai.utils_perforatedai as U; U.perforate_model(...)`, `from perforatedai.utils_perforatedai import
perforate_model` and `UPA.perforate_model(...)` all read as "perforatedai.utils_perforatedai.perforate_model", so a
check matches one name, never a spelling.
"""

from __future__ import annotations

import ast

TRAINING = "pai_launch.training."
UTILS = "perforatedai.utils_perforatedai."
GLOBALS = "perforatedai.globals_perforatedai."
DIST = "torch.distributed."


def import_map(tree: ast.Module) -> dict[str, str]:
    """Local name -> dotted module path, from every import in the file (function-level ones too)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    names[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def dotted(expr: ast.AST, imports: dict[str, str]) -> str | None:
    """The dotted name of a Name/Attribute chain with imports expanded; a call inside the chain reads as "()"."""
    if isinstance(expr, ast.Name):
        return imports.get(expr.id, expr.id)
    if isinstance(expr, ast.Attribute):
        base = dotted(expr.value, imports)
        return None if base is None else f"{base}.{expr.attr}"
    if isinstance(expr, ast.Call):
        base = dotted(expr.func, imports)
        return None if base is None else f"{base}()"
    return None


def uses_module(imports: dict[str, str], prefix: str) -> bool:
    """Whether any import brings in `prefix` (a module) or something under it."""
    return any(path == prefix or path.startswith(prefix + ".") for path in imports.values())


def tail(name: str | None) -> str:
    return (name or "").rsplit(".", 1)[-1]


def is_perforate(name: str | None) -> bool:
    return bool(name) and name in (UTILS + "perforate_model", UTILS + "initialize_pai")


def is_load(name: str | None) -> bool:
    return name == UTILS + "load_system"


def is_tracker(name: str | None, method: str) -> bool:
    return bool(name) and name.endswith("pai_tracker." + method)


def is_pc_setter(name: str | None, setting: str) -> bool:
    return bool(name) and name.startswith(GLOBALS) and name.endswith("pc.set_" + setting)


def is_training(name: str | None, function: str) -> bool:
    return name == TRAINING + function


def is_ddp(name: str | None) -> bool:
    return name in ("torch.nn.parallel.DistributedDataParallel",
                    "torch.nn.parallel.distributed.DistributedDataParallel")


def is_data_parallel(name: str | None) -> bool:
    return name in ("torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                    "torch.nn.parallel.data_parallel.DataParallel")


def is_dist(name: str | None, *functions: str) -> bool:
    return bool(name) and name.startswith(DIST) and tail(name) in functions


def is_barrier(name: str | None) -> bool:
    return is_dist(name, "barrier", "monitored_barrier")


def is_destroy(name: str | None) -> bool:
    return is_dist(name, "destroy_process_group")


#: torch.distributed calls that need a process group (the init run has none).
NEEDS_GROUP = ("barrier", "monitored_barrier", "destroy_process_group", "all_reduce", "broadcast",
               "broadcast_object_list", "all_gather", "all_gather_object", "reduce", "get_rank", "get_world_size")


def is_broadcast(name: str | None) -> bool:
    """Anything that shares values between ranks (torch's collectives, or a helper named for one)."""
    last = tail(name).lower()
    return any(word in last for word in ("broadcast", "all_reduce", "allreduce", "all_gather", "scatter"))


def is_exit(name: str | None) -> bool:
    """An exit, or a helper that may exit: training.after_restructure ends the generation unless the launcher asked
    for in-process restructures (then it rebuilds DDP itself, which is just as right)."""
    return name in ("sys.exit", "exit", "quit", "os._exit") or is_generation_end(name) \
        or is_training(name, "init_run_done")


def is_generation_end(name: str | None) -> bool:
    """pai-launch's helpers that end a generation cleanly (barrier, destroy_process_group, exit 0)."""
    return is_training(name, "end_generation") or is_training(name, "after_restructure")


def is_torch_optimizer(name: str | None) -> bool:
    return bool(name) and name.startswith("torch.optim.") and ".lr_scheduler" not in name \
        and tail(name)[:1].isupper()
