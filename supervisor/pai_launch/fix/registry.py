"""Which fixer answers which doctor id: the set-up and ordering fixes here, and the protocol's own where that module
is present (each part stands alone)."""

from __future__ import annotations

from pai_launch.fix import fixes_order, fixes_setup
from pai_launch.fix.edit import Fixer

try:
    from pai_launch.fix.fixes_protocol import FIXERS as PROTOCOL
except ModuleNotFoundError as exc:  # only that module missing, never one it imports
    if exc.name != "pai_launch.fix.fixes_protocol":
        raise
    PROTOCOL: dict[str, Fixer] = {}

FIXERS: dict[str, Fixer] = {**PROTOCOL, **fixes_setup.FIXERS, **fixes_order.FIXERS}
