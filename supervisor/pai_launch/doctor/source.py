"""Reading a training script into an AST without running it; every failure becomes one DoctorError line.

Whatever path doctor is given (a launch runs it before every start), the read is bounded before anything is
opened: only a regular file is opened (opening a FIFO blocks; a device such as /dev/zero never ends), and at most
MAX_SOURCE_BYTES of it are read. The decisions are pure (refusal, decode); read_source is the thin OS layer.
"""

from __future__ import annotations

import ast
import errno
import os
import stat
from pathlib import Path

from pai_launch.doctor.model import DoctorError

#: The most source doctor reads from one file: the largest real script in tests/doctor_scripts/corpus is 68 KB. Parsing
#: 1 MiB takes about 0.1 GB for real code, 0.8 GB and seconds for the worst (one tiny statement a line), so more would
#: be neither a training script nor cheap.
MAX_SOURCE_BYTES = 1024 * 1024
LIMIT_TEXT = "1 MiB"

FIX = "name the training script's .py file"

#: What a path that is not a regular file is, by the stat.S_IS* test that says so.
KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class Unreadable(DoctorError):
    """The file cannot be read as source at all (what it is, its size, its bytes), as opposed to a syntax error."""


def refusal(name: str, mode: int, size: int) -> str | None:
    """Why a file of this stat is not read (one line with the fix), or None when it is a regular file within the
    limit."""
    if not stat.S_ISREG(mode):
        kind = next((what for test, what in KINDS if test(mode)), "not a regular file")
        return f"{name}: cannot read: {kind}, not a regular file; {FIX}"
    if size > MAX_SOURCE_BYTES:
        return too_big(name, f"{size} bytes")
    return None


def too_big(name: str, size: str) -> str:
    return (f"{name}: cannot read: {size}, over doctor's limit of {LIMIT_TEXT} of source; {FIX} (not data or "
            "generated code)")


def os_problem(name: str, exc: OSError) -> str:
    """One line for an OSError from stat, open or read, with the fix where there is one."""
    if exc.errno == errno.ELOOP:
        return f"{name}: cannot read: a symlink loop (too many levels of symbolic links); point the link at the script"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"{name}: cannot read: permission denied; make it readable (chmod u+r) or run as its owner"
    if exc.errno == errno.ENOENT:
        return f"{name}: cannot read: No such file or directory; check the path"
    return f"{name}: cannot read: {exc.strerror or exc}"


def read_source(path: str | Path) -> bytes:
    """The file's bytes, at most MAX_SOURCE_BYTES. Raises Unreadable: not a regular file (decided by stat, before any
    open), over the limit, or an OS error. The open never blocks and is checked again, so a file swapped for a FIFO
    between the stat and the open is refused too."""
    name = str(path)
    try:
        info = os.stat(path)
        why = refusal(name, info.st_mode, info.st_size)
        if why:
            raise Unreadable(why)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise Unreadable(os_problem(name, exc)) from None
    try:
        info = os.fstat(fd)
        why = refusal(name, info.st_mode, info.st_size)
        if why:
            raise Unreadable(why)
        chunks, left = [], MAX_SOURCE_BYTES + 1  # one byte more says it is over the limit (a file that grew)
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise Unreadable(os_problem(name, exc)) from None
    finally:
        os.close(fd)
    if left <= 0:
        raise Unreadable(too_big(name, f"more than {MAX_SOURCE_BYTES} bytes"))
    return b"".join(chunks)


def decode(name: str, data: bytes) -> str:
    """The source text. Raises Unreadable: binary content (a NUL byte), or not UTF-8."""
    nul = data.find(b"\0")
    if nul >= 0:
        raise Unreadable(f"{name}: not Python source: binary content (a NUL byte at offset {nul}); {FIX}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise Unreadable(f"{name}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); save it as "
                         "UTF-8") from None


def parse_script(path: str | Path) -> ast.Module:
    """The script's module AST. Raises DoctorError: unreadable (Unreadable), or a syntax error (with its line)."""
    name = str(path)
    text = decode(name, read_source(path))
    try:
        return ast.parse(text, filename=name)
    except SyntaxError as exc:
        where = f"{name}:{exc.lineno}" if exc.lineno else name
        raise DoctorError(f"{where}: syntax error: {exc.msg}") from None
    except (RecursionError, MemoryError) as exc:  # how CPython's parser says the nesting is too deep
        raise DoctorError(f"{name}: cannot parse: nested too deeply for Python's parser ({type(exc).__name__}); "
                          f"{FIX}") from None
    except ValueError as exc:
        raise DoctorError(f"{name}: not Python source: {exc}") from None
