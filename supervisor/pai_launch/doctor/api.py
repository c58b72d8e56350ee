"""PerforatedAI's tracker and configuration however a script reaches them, read as the one name the checks match.

`GPA.pai_tracker.add_validation_score(...)`, `tracker.add_validation_score(...)` after `tracker = GPA.pai_tracker` or
`tracker = TPA.PAINeuronModuleTracker(...)`, `self.tracker.add_validation_score(...)`, the tracker a helper returns
(`def make_tracker(): ... return tracker`), and the globals module re-exported by the others (`from
perforatedai.utils_perforatedai import GPA`: the very same module) all read as
"perforatedai.globals_perforatedai.pai_tracker.add_validation_score"; `GPA.pc` the same way. The names are those of
perforatedai 3.2.9; nothing here imports it.
"""

from __future__ import annotations

import ast

from pai_launch.doctor import env as scope

PACKAGE = "perforatedai."
GLOBALS = "perforatedai.globals_perforatedai"
UTILS = "perforatedai.utils_perforatedai"
TRACKER_MODULE = "perforatedai.tracker_perforatedai"
TRACKER = GLOBALS + ".pai_tracker"
CONFIG = GLOBALS + ".pc"
TRACKER_CLASS = TRACKER_MODULE + ".PAINeuronModuleTracker"

#: The module aliases each perforatedai module imports at its top, so that `UPA.GPA` is the globals module.
RE_EXPORTS = {
    UTILS: {"GPA": GLOBALS, "PA": PACKAGE + "modules_perforatedai", "TPA": TRACKER_MODULE,
            "CL": PACKAGE + "clean_perforatedai", "BPA": PACKAGE + "blockwise_perforatedai",
            "NPA": PACKAGE + "network_perforatedai", "CPA": PACKAGE + "configure_perforatedai"},
    TRACKER_MODULE: {"GPA": GLOBALS, "PA": PACKAGE + "modules_perforatedai", "UPA": UTILS},
    PACKAGE + "modules_perforatedai": {"GPA": GLOBALS, "UPA": UTILS},
    PACKAGE + "network_perforatedai": {"GPA": GLOBALS, "UPA": UTILS},
    PACKAGE + "blockwise_perforatedai": {"GPA": GLOBALS, "PA": PACKAGE + "modules_perforatedai", "UPA": UTILS},
    PACKAGE + "clean_perforatedai": {"GPA": GLOBALS},
    PACKAGE + "configure_perforatedai": {"GPA": GLOBALS},
}

#: PAINeuronModuleTracker's methods and attributes (3.2.9): a call `X.<one of them>` asks what X holds.
TRACKER_MEMBERS = frozenset({
    "add_extra_score", "add_extra_score_without_graphing", "add_learning_rate", "add_loss", "add_pai_neuron_module",
    "add_test_score", "add_tracked_neuron_module", "add_validation_score", "apply_pb_grads", "apply_pb_zero",
    "clear_all_processors", "clear_optimizer_and_scheduler", "create_new_dendrite_module", "from_string",
    "generate_accuracy_plots", "get_current_pb_scores", "increment_scheduler", "initialize",
    "initialize_tracker_settings", "reset_module_vector", "save_graphs", "save_tracker_settings",
    "set_dendrite_training", "set_neuron_training", "set_optimizer", "set_optimizer_instance", "set_scheduler",
    "setup_optimizer", "start_epoch", "stop_epoch", "switch_time", "to_string", "member_vars", "save_name"})

ATTRIBUTE = "."  # an attribute that holds the tracker or GPA.pc is bound in its file's scope as ".NAME"
MAX_DEPTH = 6


def canonical(name: str | None) -> str | None:
    """The name with perforatedai's re-exports undone (`perforatedai.utils_perforatedai.GPA.pc` is `GPA.pc`) and a
    tracker built in place (`PAINeuronModuleTracker(...).x`) read as the tracker."""
    changed = name is not None
    while changed:
        changed = False
        for module, aliases in RE_EXPORTS.items():
            for alias, target in aliases.items():
                spelled = f"{module}.{alias}"
                if name == spelled or name.startswith(spelled + "."):
                    name, changed = target + name[len(spelled):], True
    if name is not None and (name == TRACKER_CLASS + "()" or name.startswith(TRACKER_CLASS + "().")):
        name = TRACKER + name[len(TRACKER_CLASS) + 2:]
    return name


def held(name: str | None) -> str | None:
    """TRACKER or CONFIG when a (canonical) name is one of them, else None."""
    return name if name in (TRACKER, CONFIG) else None


def is_member(attribute: str) -> bool:
    """Whether `X.<attribute>` may be a use of the tracker or of GPA.pc (worth asking what X holds)."""
    return attribute in TRACKER_MEMBERS or attribute.startswith(("set_", "get_")) or attribute.isupper()


def is_tracker_built(name: str | None) -> bool:
    """The script builds a tracker itself: PAINeuronModuleTracker(...), or the tracker's initialize(model)."""
    return name == TRACKER_CLASS or name == TRACKER + ".initialize"


def unread(name: str | None, member: str) -> bool:
    """A call of `member` on something doctor could not tie to PerforatedAI (`trainer.tracker.setup_optimizer` where
    `trainer` is a class's instance): it may be the tracker's."""
    return bool(name) and not name.startswith(PACKAGE) and (name == member or name.endswith("." + member))


def unseen(flow, *members: str) -> str:
    """What a finding that such a call is missing adds, as words for a warning, or "" when there is none: a call of
    one of `members` whose object doctor could not read, or one in code the walk never reached (a nested def nothing
    calls)."""
    for event in flow.calls(lambda n: any(unread(n, m) for m in members)):
        return f" (doctor cannot tell whether {ast.unparse(event.node.func)}, line {event.line}, is PerforatedAI's)"
    walked = {id(e.node) for e in flow.events}
    for module in flow.modules:
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in members \
                    and id(node) not in walked:
                return (f" ({ast.unparse(node.func)} at {module.shown}:{node.lineno} may: doctor does not walk the "
                        "code it is in)")
    return ""


def name_in(expr: ast.AST, env: scope.Env | None) -> str | None:
    """doctor.env.name_in, with a name, attribute or helper that holds the tracker or GPA.pc read as it."""
    name = canonical(scope.name_in(expr, env))
    if isinstance(expr, ast.Attribute) and not (name or "").startswith(PACKAGE) and is_member(expr.attr):
        owner = held_object(expr.value, env)
        if owner is not None:
            return f"{owner}.{expr.attr}"
    return name


def held_object(expr: ast.AST, env: scope.Env | None, depth: int = 0, seen: set | None = None) -> str | None:
    """TRACKER or CONFIG when `expr` holds it on some path (through names, attributes and helpers' returns); each
    expression is followed once per question, so the work stays bounded by the script's size."""
    seen = set() if seen is None else seen
    found = held(canonical(scope.name_in(expr, env)))
    key = expr.attr if isinstance(expr, ast.Attribute) else id(expr)
    if found is not None or depth > MAX_DEPTH or env is None or key in seen:
        return found
    seen.add(key)
    if isinstance(expr, ast.Attribute):
        assigned = [(v, w) for v, w in scope.candidates(expr, env) if v is not expr]  # an instance's (doctor.classes)
        if assigned:
            return next(filter(None, (held_object(v, w, depth + 1, seen) for v, w in assigned)), None)
        expr = ast.Name(id=ATTRIBUTE + expr.attr)
    if isinstance(expr, ast.Name):
        for value, where in scope.candidates(expr, env):
            found = held_object(value, where, depth + 1, seen) if value is not expr else None
            if found is not None:
                return found
    elif isinstance(expr, ast.Call):
        local = scope.function_of(expr.func, env)
        if local is not None:
            inner = scope.bind_call(local[0], expr.args, expr.keywords, env, local[1])
            inner.names.update(_assigned(local[0], inner))
            for result in scope.returned(local[0]):
                found = held_object(result, inner, depth + 1, seen)
                if found is not None:
                    return found
    return None


def _assigned(function: ast.AST, inner: scope.Env) -> dict[str, scope.Binding]:
    """The names a helper's body assigns (`tracker = GPA.pai_tracker` before `return tracker`), each with every value
    it is given there: the helper is not walked for its return value."""
    values: dict[str, list[ast.AST]] = {}
    stack = list(getattr(function, "body", []))
    while stack:
        node = stack.pop(0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    values.setdefault(target.id, []).append(node.value)
        stack.extend(ast.iter_child_nodes(node))
    return {name: scope.Binding(None, alts=tuple(scope.Binding(v, inner) for v in held))
            for name, held in values.items()}


def remember_attribute(target: ast.Attribute, value: ast.AST | None, env: scope.Env) -> None:
    """`self.tracker = ...` that holds the tracker or GPA.pc: bound as ".tracker" in the file's scope, so that
    `X.tracker.add_validation_score` anywhere in the file reads as the tracker's where X is nothing the walk knows
    (an instance the walk made reads its own attribute: held_object asks doctor.classes first)."""
    if value is None or held_object(value, env) is None:
        return
    root = env
    while root.parent is not None:
        root = root.parent
    root.names[ATTRIBUTE + target.attr] = scope.Binding(value, env)

