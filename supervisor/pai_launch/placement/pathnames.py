"""Paths the user gives, checked against the file system's limits before anything touches them: a component longer
than a file name may be (255 bytes on Linux's file systems) or a whole path longer than PATH_MAX makes every system
call on it fail with ENAMETOOLONG. Pure: text in, a problem's words out."""

from __future__ import annotations

from pathlib import PurePath

#: Bytes in one file name (NAME_MAX) and in a whole path (PATH_MAX) on Linux.
NAME_MAX = 255
PATH_MAX = 4096


def _shown(text: str) -> str:
    return text if len(text) <= 60 else f"{text[:28]}...{text[-28:]}"


def problem(what: str, path: str | PurePath) -> str | None:
    """One line naming `what` (an option, an argument), the problem and the fix; None when the path fits."""
    text = str(path)
    encoded = text.encode("utf-8", "surrogateescape")  # as the file system sees it
    if len(encoded) >= PATH_MAX:
        return f"{what} {_shown(text)} is {len(encoded)} bytes long, more than a path may be ({PATH_MAX - 1}): give " \
            "a shorter path"
    for part in encoded.split(b"/"):
        if len(part) > NAME_MAX:
            name = _shown(part.decode("utf-8", "surrogateescape"))
            return (f"{what} {_shown(text)}: the name {name} is {len(part)} bytes, more than a file name may be "
                    f"({NAME_MAX}): give a shorter name")
    return None
