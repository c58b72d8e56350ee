"""The set-up fixes one keyword or one line makes: DistributedDataParallel's two flags, and the two options pai-launch
passes (added to the parser the script parses, or the underscore spelling added to a hyphen-spelled one)."""

from __future__ import annotations

import libcst
from libcst.helpers import get_full_name_for_node as get_name

from pai_launch.doctor import names
from pai_launch.doctor.checks_setup import DDP_POSITION
from pai_launch.fix import cst
from pai_launch.fix.edit import FixContext, Unfixable


def _keyword(value: str, keyword: str):
    """A fixer that makes DistributedDataParallel's `keyword` the constant `value` on the call the finding names."""

    def fix(module: libcst.Module, ctx: FixContext) -> libcst.Module:
        tree = cst.Tree(module)
        call = tree.call_at(ctx.finding.line, lambda n: names.is_ddp(n) or names.tail(n) == "DistributedDataParallel",
                            "DistributedDataParallel")
        return tree.module.deep_replace(call, set_keyword(call, keyword, value))

    return fix


def set_keyword(call: libcst.Call, keyword: str, value: str) -> libcst.Call:
    """The call with `keyword=value`: its keyword's value or its positional argument replaced, or the keyword added
    after the last argument. A `**splat` may hold the keyword too: Unfixable, never a guess."""
    args = list(call.args)
    new_value = libcst.parse_expression(value)
    for n, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == keyword:
            args[n] = arg.with_changes(value=new_value)
            return call.with_changes(args=args)
    positional = [n for n, arg in enumerate(args) if arg.keyword is None and not arg.star]
    if len(positional) > DDP_POSITION[keyword]:
        at = positional[DDP_POSITION[keyword]]
        args[at] = args[at].with_changes(value=new_value)
        return call.with_changes(args=args)
    if any(arg.star == "**" for arg in args):
        raise Unfixable(f"the call takes keywords from a **dict, which may hold {keyword}: set {keyword}={value} there")
    added = libcst.parse_expression(f"f({keyword}={value})").args[0]
    if args and isinstance(args[-1].comma, libcst.Comma):  # a trailing comma: the new one goes after it, alike
        before = args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, libcst.Comma) else \
            libcst.Comma(whitespace_after=libcst.SimpleWhitespace(" "))
        added = added.with_changes(comma=args[-1].comma)
        args[-1] = args[-1].with_changes(comma=before)
    return call.with_changes(args=args + [added])


FLAGS = {"flag-perforate-model-parallel": ("--perforate_model_parallel", 'action="store_true"'),
         "flag-pai-load-folder": ("--pai_load_folder", "default=None")}
PARSING = ("parse_args", "parse_known_args", "parse_intermixed_args")


def fix_flag(module: libcst.Module, ctx: FixContext) -> libcst.Module:
    """The option added after the last add_argument of the parser the script parses with; a hyphen-spelled option
    gets the underscore spelling as an alias."""
    flag, extra = FLAGS[ctx.finding.id]
    tree = cst.Tree(module)
    hyphens = flag.replace("_", "-")
    spelled = [c for c in tree.calls(lambda n: names.tail(n) == "add_argument") if _strings(c) & {hyphens}]
    if spelled:
        call = spelled[0]
        if flag in _strings(call):
            return module
        last = max(n for n, arg in enumerate(call.args) if arg.keyword is None
                   and isinstance(arg.value, libcst.SimpleString))
        alias = libcst.Arg(libcst.SimpleString(f'"{flag}"'))
        args = list(call.args)
        if isinstance(args[last].comma, libcst.Comma):
            args.insert(last + 1, alias.with_changes(comma=libcst.Comma(whitespace_after=libcst.SimpleWhitespace(" "))))
        else:
            args.insert(last + 1, alias)
        return module.deep_replace(call, call.with_changes(args=args))
    parser = _parser(tree)
    adds = [c for c in tree.calls(lambda n: n == f"{parser}.add_argument")]
    if not adds:
        raise Unfixable(f"{parser} has no add_argument call in this file to add {flag} after")
    anchor = tree.statement(adds[-1])
    return cst.insert_after(tree, anchor, cst.statement_line(f'{parser}.add_argument("{flag}", {extra})\n'))


def _parser(tree: cst.Tree) -> str:
    """The name of the one argparse parser whose parse_args the file calls; Unfixable when none or several."""
    parsing = {get_name(c.func.value) for c in tree.calls(lambda n: names.tail(n) in PARSING)
               if isinstance(c.func, libcst.Attribute)}
    parsing.discard(None)
    if not parsing:
        raise Unfixable("no argparse parser in this file whose parse_args it calls: add the option where the script "
                        "reads its command line")
    if len(parsing) > 1:
        raise Unfixable(f"several parsers call parse_args here ({', '.join(sorted(parsing))}): add the option to the "
                        "one that reads the command line")
    return parsing.pop()


def _strings(call: libcst.Call) -> set[str]:
    return {arg.value.evaluated_value for arg in call.args
            if arg.keyword is None and isinstance(arg.value, libcst.SimpleString)}


FIXERS = {
    "ddp-broadcast-buffers": _keyword("False", "broadcast_buffers"),
    "ddp-find-unused-parameters": _keyword("True", "find_unused_parameters"),
    "flag-perforate-model-parallel": fix_flag,
    "flag-pai-load-folder": fix_flag,
}
