"""What StoreLink asks of torch's TCPStore, in memory: the agreement's logic driven by hand in unit tests."""

from __future__ import annotations


class MemoryStore:
    """torch's TCPStore calls over a dict (keys as any client of the port would list them); `ops` counts every
    request a real one would serve. compare_set answers as torch's does: `desired` is set where the key holds
    `expected`, or is absent and `expected` is empty; the reply is the value there now (`expected` where the key is
    absent and stays so)."""

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}
        self.ops = 0

    def check(self, keys):
        self.ops += 1
        return all(key in self.values for key in keys)

    def get(self, key):
        self.ops += 1
        return self.values[key]

    def set(self, key, value):
        self.ops += 1
        self.values[key] = _bytes(value)

    def add(self, key, amount):
        self.ops += 1
        value = int(self.values.get(key, b"0")) + amount
        self.values[key] = str(value).encode()
        return value

    def compare_set(self, key, expected, desired):
        self.ops += 1
        there = self.values.get(key)
        if (there is None and expected == "") or there == _bytes(expected):
            self.values[key] = _bytes(desired)
        return self.values.get(key, _bytes(expected))

    def multi_get(self, keys):
        self.ops += 1
        return [self.values[key] for key in keys]

    def delete_key(self, key):
        self.ops += 1
        return self.values.pop(key, None) is not None


def _bytes(value) -> bytes:
    return value.encode() if isinstance(value, str) else value
