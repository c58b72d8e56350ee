"""The option declarations are the one place an option is written: the command's signature, its record and the spec
follow from them, and each lands somewhere."""

import inspect
from dataclasses import fields

import pytest

from pai_launch.cli import declared, specbuilder
from pai_launch.cli import launch as cli
from pai_launch.placement.spec import LaunchSpec


@pytest.mark.timeout(30)
def test_every_option_fills_a_spec_field_or_is_resolved_or_command_line_only():
    spec_fields = {field.name for field in fields(LaunchSpec)}
    stray = [option.name for option in declared.OPTIONS
             if option.fills not in spec_fields | {declared.RESOLVED, declared.COMMAND_ONLY}]
    assert stray == []


@pytest.mark.timeout(30)
def test_every_option_the_builder_resolves_is_read_by_it():
    source = inspect.getsource(specbuilder)
    unread = [option.name for option in declared.OPTIONS
              if option.fills == declared.RESOLVED and f"typed.{option.name}" not in source]
    assert unread == []


@pytest.mark.timeout(30)
def test_no_spec_field_is_filled_by_two_options():
    filled = [option.fills for option in declared.TYPED if option.fills != declared.RESOLVED]
    assert len(filled) == len(set(filled))


@pytest.mark.timeout(30)
def test_the_commands_signature_and_record_are_the_declarations():
    names = [option.name for option in declared.OPTIONS]
    assert list(inspect.signature(cli.launch).parameters) == ["ctx", *names]
    assert [field.name for field in fields(specbuilder.CommandLine)] == [option.name for option in declared.TYPED]
    assert {option.name for option in declared.OPTIONS} - set(specbuilder.CommandLine.__dataclass_fields__) == {
        "print_completion", "version"}


@pytest.mark.timeout(30)
def test_the_fields_taken_as_typed_go_through_their_converters():
    defaults = {option.name: option.default for option in declared.TYPED}
    typed = specbuilder.CommandLine.of({**defaults, "script": "train.py", "script_args": ["--x"], "no_doctor": True,
                                        "restructure": " In-Process ", "preload": "torch, ,numpy", "grace": 5.0})
    taken = specbuilder.as_typed(typed)
    assert (taken["script_args"], taken["doctor"], taken["restructure"]) == (("--x",), False, "in-process")
    assert (taken["preload"], taken["grace"]) == (("torch", "numpy"), 5.0)
