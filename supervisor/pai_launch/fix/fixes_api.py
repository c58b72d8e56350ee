"""A call by a name perforatedai 3.x renamed, made by the new name: 1.x's `UPA.initialize_pai(model, ...)` is 3.x's
`UPA.perforate_model(model, ...)`, with the same parameters (3.x adds `config_file`). Only the callee's last name
changes; a call passing a parameter perforate_model lacks, or a function imported by its own name, is left with the
reason."""

from __future__ import annotations

import libcst

from pai_launch.doctor import names
from pai_launch.fix import cst
from pai_launch.fix.edit import FixContext, Unfixable

#: perforatedai 3.2.9's perforate_model, after the model (its docstring's parameters, in order)
PERFORATE_PARAMETERS = ("doing_pai", "save_name", "making_graphs", "maximizing_score", "num_classes",
                        "values_per_train_epoch", "values_per_val_epoch", "zooming_graph", "config_file")


def fix_initialize_pai(module: libcst.Module, ctx: FixContext) -> libcst.Module:
    tree = cst.Tree(module)
    call = tree.call_at(ctx.finding.line, lambda n: n == names.UTILS + "initialize_pai", "initialize_pai")
    if not isinstance(call.func, libcst.Attribute):
        raise Unfixable("initialize_pai is imported by its own name: import perforate_model instead and call it")
    if any(arg.star for arg in call.args):
        raise Unfixable("the call passes *args or **kwargs, which may hold a parameter perforate_model lacks")
    unknown = [arg.keyword.value for arg in call.args
               if arg.keyword is not None and arg.keyword.value not in PERFORATE_PARAMETERS]
    if unknown:
        raise Unfixable(f"perforate_model has no parameter {unknown[0]}: port that call by hand")
    if sum(arg.keyword is None for arg in call.args) > 1 + len(PERFORATE_PARAMETERS):
        raise Unfixable("the call passes more positional arguments than perforate_model takes")
    renamed = call.with_changes(func=call.func.with_changes(attr=libcst.Name("perforate_model")))
    return tree.module.deep_replace(call, renamed)


FIXERS = {"initialize-pai-removed": fix_initialize_pai}
