"""Reading a training script into an AST without running it; every failure becomes one DoctorError line."""

from __future__ import annotations

import ast
from pathlib import Path

from pai_launch.doctor.model import DoctorError


def parse_script(path: str | Path) -> ast.Module:
    """The script's module AST. Raises DoctorError: unreadable, not UTF-8, or a syntax error (with its line)."""
    name = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise DoctorError(f"{name}: cannot read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DoctorError(f"{name}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None
    try:
        return ast.parse(text, filename=name)
    except SyntaxError as exc:
        where = f"{name}:{exc.lineno}" if exc.lineno else name
        raise DoctorError(f"{where}: syntax error: {exc.msg}") from None
    except ValueError as exc:  # NUL bytes
        raise DoctorError(f"{name}: not Python source: {exc}") from None
