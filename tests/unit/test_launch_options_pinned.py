"""The launch command's --help and option table, pinned: how the options are declared may change, what a user sees
and types may not. The pinned files are regenerated only on purpose (PAI_LAUNCH_PIN=1) when an option changes."""

import json
import os
import queue
from pathlib import Path

import pytest
import typer

from pai_launch.cli import launch as cli

PINNED = Path(__file__).parent / "pinned"


def option_table() -> list[dict]:
    """Every parameter of the launch command as click sees it: flags, variable, default, type, help."""
    command = typer.main.get_command(cli.app)
    return [{key: _shown(value) for key, value in sorted(vars(p).items()) if key != "_runtime_param"}
            for p in command.params]


def _shown(value) -> str:
    """A value as text that does not change between runs: a function by its name, not its address."""
    if hasattr(value, "parameter_info"):  # typer's type descriptor: the annotation and the parser it reads with
        return f"{value.annotation!r} parser={_shown(getattr(value.parameter_info, 'parser', None))}"
    return getattr(value, "__qualname__", None) or repr(value)


def help_text(monkeypatch, capsys) -> str:
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("TERMINAL_WIDTH", "120")
    assert cli.run_command_line(["--help"], queue.SimpleQueue()) == 0
    return capsys.readouterr().out


def check(name: str, actual: str) -> None:
    path = PINNED / name
    if os.environ.get("PAI_LAUNCH_PIN") == "1":
        path.write_text(actual)
    assert actual == path.read_text()


@pytest.mark.timeout(60)
def test_the_help_is_as_pinned(monkeypatch, capsys):
    check("launch_help.txt", help_text(monkeypatch, capsys))


@pytest.mark.timeout(60)
def test_the_option_table_is_as_pinned():
    check("launch_options.json", json.dumps(option_table(), indent=1) + "\n")
