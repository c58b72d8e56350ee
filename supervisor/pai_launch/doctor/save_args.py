"""The value a script's own argparse option takes from the arguments it runs with, read without argparse: a launch
knows the script's arguments, so the save folder read from `--save`'s default can be checked against them.

Pure: the files' ASTs and the argument list in, the value out.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence


def option_flags(trees: Iterable[ast.Module]) -> dict[str, list[str]]:
    """argparse dest -> its flags (`--save-dir`, `-s`), from every add_argument call in the files."""
    found: dict[str, list[str]] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "add_argument"):
                continue
            flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                     and a.value.startswith("-")]
            dest = next((k.value.value for k in node.keywords if k.arg == "dest" and isinstance(k.value, ast.Constant)
                         and isinstance(k.value.value, str)), None)
            if dest is None and flags:
                long = [f for f in flags if f.startswith("--")] or flags
                dest = long[0].lstrip("-").replace("-", "_")
            if dest is not None:
                found.setdefault(dest, []).extend(flags)
    return found


def given(args: Sequence[str], flags: Sequence[str], every_flag: Iterable[str]) -> str | None:
    """The value the arguments give the option with these flags (the last one wins, as in argparse), or None when
    they do not name it. `--save X`, `--save=X`, and a long flag's unique prefix (`--sa X`) all count; nothing after
    a bare `--` does."""
    longs = [f for f in every_flag if f.startswith("--")]
    value, index = None, 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            break
        name, equals, attached = arg.partition("=")
        match = name in flags or (name.startswith("--") and len(name) > 2 and name not in longs
                                  and [f for f in longs if f.startswith(name)] in ([f] for f in flags))
        if match and equals:
            value = attached
        elif match and index + 1 < len(args):
            value, index = args[index + 1], index + 1
        index += 1
    return value
