"""Which fixer answers which doctor id: the set-up and ordering fixes, the renamed API, and the protocol's own."""

from __future__ import annotations

from pai_launch.fix import fixes_api, fixes_order, fixes_protocol, fixes_setup
from pai_launch.fix.edit import Fixer

FIXERS: dict[str, Fixer] = {**fixes_protocol.FIXERS, **fixes_setup.FIXERS, **fixes_order.FIXERS,
                            **fixes_api.FIXERS}
