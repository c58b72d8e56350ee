"""One error class for every problem that ends pai-launch on purpose (wire.errors.LaunchError), with its exit code;
the command line's boundaries catch that class, once, and exit with the code it carries."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pai_launch
from pai_launch.core import exitcodes
from pai_launch.wire.errors import LaunchError
from tests.helpers import docs_page

PACKAGE = Path(pai_launch.__file__).resolve().parent

#: Exceptions that are not a LaunchError, and why: each is handled where it is raised, or ends elsewhere.
NOT_LAUNCH_ERRORS = {
    "agent.control.Abandoned": "the agent's interrupt of torch's launcher, caught around it",
    "agent.torchcompat.UnsupportedTorch": "raised in the agent: the generation's launcher error says it",
    "placement.slurm._BadNodelist": "the node-list parser's own, turned into a SlurmError",
    "doctor.model.DoctorError": "the doctor tool's (its own exit codes)",
    "fix.edit.Unfixable": "a fixer's: the fix loop catches it and leaves the finding with its reason",
    "doctor.source.Unreadable": "a DoctorError for a file that is no source to read (exit 2; a helper's is skipped)",
    "doctor.budget.OutOfTime": "a launch's script check out of time: one warning, and the launch goes on",
    "status.model.StatusError": "the status tool's (its own exit codes)",
    "envreport.interpreter.NoInterpreter": "the env tool's --python naming no interpreter: its one-line usage error",
    "savefmt.safeopen.WrongKind": "an OSError its callers turn into their own one-line errors",
    "savefmt.safeopen.TooLarge": "an OSError its callers turn into their own one-line errors",
    "in_process.ModelsDiffer": "raised in a training process: ends it with its one line (exit 1), a worker failure",
    "wire.codec.WireError": "a peer that speaks another protocol: a bug, exit 70 (internal error)",
    "wire.storelink.StoreLost": "raised in the agent: its generation's result says it",
    "wire.storelink.JobStopped": "raised in the agent: its generation's result says it",
}


def _exception_classes() -> dict[str, type]:
    found = {}
    for module in pkgutil.walk_packages(pai_launch.__path__, "pai_launch."):
        if module.name.endswith("__main__"):
            continue
        loaded = importlib.import_module(module.name)
        for name, obj in vars(loaded).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == module.name:
                found[f"{module.name.removeprefix('pai_launch.')}.{name}"] = obj
    return found


def test_every_error_is_a_launch_error_with_a_documented_code_or_listed_with_why():
    classes = _exception_classes()
    others = {name for name, cls in classes.items() if not issubclass(cls, LaunchError)}
    assert others == set(NOT_LAUNCH_ERRORS), (others ^ set(NOT_LAUNCH_ERRORS))
    documented = {code for code, _ in exitcodes.TABLE}
    for name, cls in classes.items():
        if issubclass(cls, LaunchError):
            assert cls.exit_code in documented, f"{name}: exit code {cls.exit_code} is not in the table of exit codes"


def test_the_codes_each_error_carries():
    from pai_launch.placement.spec import PreflightError
    from pai_launch.savefmt.record import StateError
    from pai_launch.supervise.folder.savefolder import SaveFolderError
    from pai_launch.supervise.loop.translator import InternalError

    assert (PreflightError.exit_code, StateError.exit_code) == (exitcodes.USAGE, exitcodes.USAGE)
    assert (SaveFolderError.exit_code, InternalError.exit_code) == (exitcodes.SAVE_FOLDER, exitcodes.INTERNAL_ERROR)


def test_the_command_lines_boundaries_catch_launch_error_itself_never_a_list_of_its_kinds():
    kinds = {name.rsplit(".", 1)[1] for name, cls in _exception_classes().items()
             if issubclass(cls, LaunchError) and cls is not LaunchError}
    caught = {}
    for path in (PACKAGE / "cli").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ExceptHandler) and node.type is not None:
                names = {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node.type)
                         if isinstance(n, (ast.Name, ast.Attribute))}
                caught.setdefault(path.name, set()).update(names)
    # envfacts does not end on one: `pai-launch env` reports the error a launch here would end on.
    assert {file for file, names in caught.items() if "LaunchError" in names} == {"launch.py", "startup.py",
                                                                                  "envfacts.py"}
    assert not {file: names & kinds for file, names in caught.items() if names & kinds}


def test_the_exit_codes_page_has_a_row_for_every_code():
    rows = set(re.findall(r"^\| ([0-9]+|128\+N|other) \|", docs_page("users/exit-codes.md"), flags=re.M))
    assert rows == {str(code) for code, _ in exitcodes.TABLE}, rows ^ {str(code) for code, _ in exitcodes.TABLE}
