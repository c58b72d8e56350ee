"""The files side of --fix: a copy of the files doctor read to fix in (so --diff changes nothing and a fix that fails
leaves nothing half done), the git check, and writing back beside FILE.orig."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from pai_launch.doctor.model import Report


@dataclass(frozen=True)
class Copied:
    real: Path    # the project's file
    shown: str    # as doctor names it in a report
    text: str     # its text when copied


class Workspace:
    """The script and the project files doctor read, at the same places relative to each other, in a temporary
    folder (removed by close())."""

    def __init__(self, script: str | Path, report: Report):
        shown = [str(script), *report.files]
        reals = [Path(os.path.realpath(s)) for s in shown]
        root = Path(os.path.commonpath([p.parent for p in reals]))
        self.folder = Path(os.path.realpath(tempfile.mkdtemp(prefix="pai-launch-fix-")))
        self.files: dict[str, Copied] = {}
        for name, real in zip(shown, reals):
            copy = self.folder / real.relative_to(root)
            copy.parent.mkdir(parents=True, exist_ok=True)
            text = real.read_bytes().decode("utf-8")
            copy.write_bytes(text.encode("utf-8"))
            self.files[str(copy)] = Copied(real, name, text)
        self.script = self.folder / reals[0].relative_to(root)

    def read(self, path: Path) -> str:
        return path.read_bytes().decode("utf-8")

    def write(self, path: Path, text: str) -> None:
        if str(path) not in self.files:
            raise ValueError(f"{path} is not a file doctor read")
        path.write_bytes(text.encode("utf-8"))

    def changes(self) -> list[tuple[Copied, str]]:
        """(the original, its fixed text) for each file the fixes changed."""
        found = []
        for copy, original in self.files.items():
            text = self.read(Path(copy))
            if text != original.text:
                found.append((original, text))
        return found

    def shown(self, path: str | None) -> str | None:
        return self.files[path].shown if path in self.files else path

    def in_project(self, report: Report) -> Report:
        """The report with the project's own names for the files instead of the copies'."""
        findings = tuple(replace(f, path=self.shown(f.path)) for f in report.findings)
        return replace(report, script=self.shown(report.script), findings=findings,
                       files=tuple(self.shown(f) for f in report.files))

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def unchanged(copy: Copied) -> bool:
    """Whether the project's file still holds the text the fixes started from."""
    try:
        return copy.real.read_bytes() == copy.text.encode("utf-8")
    except OSError:
        return False


def uncommitted(path: Path) -> bool:
    """Whether git holds the file as other than committed (changed, staged, untracked or ignored): git could not give
    back what a fix overwrites. False outside a git work tree or without git."""
    try:
        done = subprocess.run(["git", "-C", str(path.parent), "status", "--porcelain", "--ignored", "--", path.name],
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and bool(done.stdout.strip())


def backup(path: Path) -> bool:
    """FILE.orig beside the file, a copy of it; False when one is there already (it is kept as it is)."""
    orig = path.with_name(path.name + ".orig")
    if orig.exists() or orig.is_symlink():
        return False
    shutil.copy2(path, orig)
    return True


def write_back(path: Path, text: str) -> None:
    """The file's new text, written whole (a temporary file beside it, renamed over it) with the file's mode."""
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(text.encode("utf-8"))
        shutil.copymode(path, temporary)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
