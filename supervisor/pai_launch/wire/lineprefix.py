"""torchrun's --log-line-prefix-template: what starts each relayed line of a rank, with its macros. Pure.

torch renders the template with `string.Template` for its own console copy of the ranks' output, leaving a macro it
does not know as typed. pai-launch relays that output itself (agent.relay), so it renders the template on every
torch, torch 2.14's `${hostname}` included, and a macro it does not know is refused before anything starts rather
than printed on every line. The supervisor checks the template (`problem`); each node's agent renders it.
"""

from __future__ import annotations

from string import Template

#: The macros, as torch names them: the worker's role, its global rank, its rank on this node, and the name of the
#: node it runs on (`socket.gethostname()`, not the fully qualified name, as torch 2.14 has it).
MACROS = ("role_name", "rank", "local_rank", "hostname")
#: torch's default role, which every pai-launch worker has (torchrun's --role is only noted).
ROLE = "default"
#: What `${rank}` becomes in a multi-node job before the worker's group, and so its global rank, is known.
UNKNOWN_RANK = "?"


def problem(template: str) -> str | None:
    """Why `template` cannot be rendered (a macro that is not one of MACROS, a `${` left open), None if it can.
    `$$` is a literal `$`, and a `$` before anything that cannot be a name stays as typed, as torch leaves it."""
    for match in Template.pattern.finditer(template):
        name = match.group("named") or match.group("braced")
        if name is not None and name not in MACROS:
            return (f"{match.group(0)} is not one of its macros ({', '.join('${' + macro + '}' for macro in MACROS)}); "
                    "write $$ for a literal $")
        if match.group("invalid") is not None and template.startswith("${", match.start()):
            return (f"the ${{ at character {match.start() + 1} opens no macro: close it, as in ${{rank}}, or write $$ "
                    "for a literal $")
    return None


def render(template: str, *, rank: int | str, local_rank: int, hostname: str, role_name: str = ROLE) -> str:
    """The template for one worker (one `problem` accepts: the macros it knows are all there are)."""
    return Template(template).safe_substitute(role_name=role_name, rank=rank, local_rank=local_rank, hostname=hostname)

