"""Typed messages as JSON lines: frozen dataclasses in, one JSON object out, and back into the same types.

Every boundary between pai-launch's processes speaks through this (the supervisor and its agent, the agents and
the job's store). A message class is registered under a type tag in its protocol (a `Protocol`, one registry per
direction); encoding writes the tag with the fields, decoding looks the tag up and converts every field by its
annotation (tuples, nested dataclasses, optional values), checking types on the way. So a line from a damaged or
mismatched peer is one WireError that names what is wrong, never a half-built object or a KeyError later on.
Stdlib only: the supervisor, the agent and the store process all import it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import types
import typing
from collections.abc import Iterator

#: A line longer than this is refused, not buffered (a result's log tails are a few KiB).
LINE_LIMIT = 16 * 1024 * 1024

_PROTOCOL_OF: dict[type, Protocol] = {}


class WireError(ValueError):
    """A line that is not a message of the protocol it arrived on."""


class Protocol:
    """The messages one side sends the other: type tag <-> frozen dataclass."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._types: dict[str, type] = {}
        self._tags: dict[type, str] = {}

    def message(self, tag: str):
        """Class decorator: register a frozen dataclass under `tag`."""
        def register(cls: type) -> type:
            params = getattr(cls, "__dataclass_params__", None)
            if params is None or not params.frozen:
                raise TypeError(f"{cls.__name__} must be a frozen dataclass to be a message")
            if tag in self._types or cls in _PROTOCOL_OF:
                raise TypeError(f"{cls.__name__}: the tag {tag!r} or the class is registered already")
            self._types[tag] = cls
            self._tags[cls] = tag
            _PROTOCOL_OF[cls] = self
            return cls
        return register

    def types(self) -> dict[str, type]:
        return dict(self._types)

    def tag(self, cls: type) -> str:
        return self._tags[cls]

    def decode(self, line: bytes | str, expect: type | None = None):
        """The message on `line`; WireError if it is not JSON, has an unknown type tag, or a field of the wrong type
        (or, with `expect`, is another message than that)."""
        try:
            data = json.loads(line)
        except (ValueError, UnicodeDecodeError) as exc:
            raise WireError(f"{self.name}: not a JSON line ({exc}): {_shown(line)}") from None
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            raise WireError(f"{self.name}: a line without a type tag: {_shown(line)}")
        tag = data.pop("type")
        cls = self._types.get(tag)
        if cls is None:
            raise WireError(f"{self.name}: unknown message type {tag!r} (known: {', '.join(sorted(self._types))})")
        if expect is not None and cls is not expect:
            raise WireError(f"{self.name}: a {tag!r} message where {self._tags.get(expect, expect.__name__)!r} was "
                            "expected")
        try:
            return from_fields(cls, data, where=tag)
        except WireError as exc:
            raise WireError(f"{self.name}: {exc}") from None


def encode(message) -> bytes:
    """One line: the message's type tag and fields, newline-terminated (no raw newline inside)."""
    protocol = _PROTOCOL_OF.get(type(message))
    if protocol is None:
        raise TypeError(f"{type(message).__name__} is not a registered message")
    return (json.dumps({"type": protocol.tag(type(message)), **to_fields(message)}) + "\n").encode()


def encode_text(message) -> str:
    """The same, as text without the newline (a store value)."""
    return encode(message)[:-1].decode()


def to_fields(message) -> dict:
    return dataclasses.asdict(message)


def from_fields(cls: type, data: dict, where: str = ""):
    """`cls` built from a decoded JSON object, each field converted and checked by its annotation."""
    where = where or cls.__name__
    hints = _hints(cls)
    fields = {field.name: field for field in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise WireError(f"{where}: unknown field(s) {', '.join(unknown)}")
    missing = [name for name, field in fields.items() if name not in data
               and field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING]
    if missing:
        raise WireError(f"{where}: missing field(s) {', '.join(missing)}")
    return cls(**{name: _convert(hints[name], value, f"{where}.{name}") for name, value in data.items()})


@functools.cache
def _hints(cls: type) -> dict:
    return typing.get_type_hints(cls)


def _convert(hint, value, where: str):
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is typing.Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        problems = []
        for option in (arg for arg in args if arg is not type(None)):
            try:
                return _convert(option, value, where)
            except WireError as exc:
                problems.append(str(exc))
        raise WireError(problems[0] if len(problems) == 1 else f"{where}: {_kind(value)} fits none of {hint}")
    if origin is tuple:
        if not isinstance(value, list):
            raise WireError(f"{where}: expected a list, got {_kind(value)}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], item, f"{where}[{i}]") for i, item in enumerate(value))
        if len(value) != len(args):
            raise WireError(f"{where}: expected {len(args)} items, got {len(value)}")
        return tuple(_convert(arg, item, f"{where}[{i}]") for i, (arg, item) in enumerate(zip(args, value)))
    if origin is dict:
        if not isinstance(value, dict):
            raise WireError(f"{where}: expected an object, got {_kind(value)}")
        key_type, value_type = args or (str, typing.Any)
        return {_convert(key_type, k, where): _convert(value_type, v, f"{where}[{k!r}]") for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise WireError(f"{where}: expected an object, got {_kind(value)}")
        return from_fields(hint, value, where)
    if hint is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if hint in (int, str, bool) and type(value) is hint:
        return value
    raise WireError(f"{where}: expected {getattr(hint, '__name__', hint)}, got {_kind(value)}")


def _kind(value) -> str:
    return "null" if value is None else type(value).__name__


def _shown(line: bytes | str, limit: int = 120) -> str:
    text = line.decode(errors="replace") if isinstance(line, bytes) else line
    return repr(text if len(text) <= limit else text[:limit] + "...")


def read_lines(fd: int, limit: int = LINE_LIMIT, chunk: int = 65536) -> Iterator[bytes]:
    """The non-blank lines on a pipe until EOF, whole however the writes were split (both ends of a protocol read
    this way); a line past `limit` bytes is a WireError, not memory. A last line without its newline is a write the
    peer died in: dropped."""
    buffer = bytearray()
    while True:
        data = os.read(fd, chunk)
        if not data:
            return
        buffer += data
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            line = bytes(buffer[start:end])
            start = end + 1
            if line.strip():
                yield line
        del buffer[:start]
        if len(buffer) > limit:
            raise WireError(f"a line longer than {limit} bytes on fd {fd}")
