"""The job's secret: a random string only the job's nodes know. Every pai-launch key in the job's store is named by a
keyed hash of it and every value carries a tag made with it, so a client of the store's port that does not know it
cannot raise the stop flag or forge a node's result (torch's TCPStore lets any client list the keys: the names
give nothing away, and a value copied or made up is ignored).

Node 0 writes it to SAVE/.pai-launch/coordinator (mode 0600, never through a link); the other nodes read it from
the shared save folder, which also shows them that the folder is shared. The store publishes only its digest, so a
node can tell node 0's fresh secret from a stale file a previous run left. No torch here: both sides use it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from pai_launch.wire.errors import LaunchError

#: Relative to the save folder.
SECRET_FILE = ".pai-launch/coordinator"
_PREFIX = "pai/"


class SecretError(LaunchError):
    """The secret file cannot be written or read; the message names the path and the fix."""


def new_secret() -> str:
    return secrets.token_hex(16)


def digest(secret: str) -> str:
    """What the store publishes: enough to recognise the secret, nothing to rebuild it from."""
    return hashlib.sha256(f"pai-launch job secret {secret}".encode()).hexdigest()[:32]


def _mac(secret: str, text: str) -> str:
    return hmac.new(secret.encode(), text.encode(), hashlib.sha256).hexdigest()[:32]


def namespaced(secret: str, key: str) -> str:
    """'pai/stop' -> 'pai/j/<keyed hash>': a key of this job only, unguessable without the secret. A key outside pai/
    (torch's own) is left alone; so is every key without a secret (the public INFO)."""
    if not secret or not key.startswith(_PREFIX):
        return key
    return f"{_PREFIX}j/{_mac(secret, 'key ' + key)}"


def seal(secret: str, key: str, value: str) -> str:
    """`value` as stored under `key`: with a tag only the secret's holders can make, for this key only."""
    return f"{_mac(secret, f'value {key} {value}')}:{value}"


def unseal(secret: str, key: str, stored: str) -> str | None:
    """The value stored under `key` if its tag is right; None for a value not sealed with this job's secret."""
    tag, sep, value = stored.partition(":")
    if not sep or not hmac.compare_digest(tag, _mac(secret, f"value {key} {value}")):
        return None
    return value


def write(save_dir: Path, secret: str) -> Path:
    """Write `secret` to SAVE/.pai-launch/coordinator, mode 0600, created afresh (a previous run's file is replaced;
    a link there is removed, never followed)."""
    path = Path(save_dir) / SECRET_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if path.is_symlink() or path.exists():
            path.unlink()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise SecretError(f"cannot write the job's secret to {path} ({exc.strerror}): remove what is there and make "
                          f"{path.parent} writable") from exc
    with os.fdopen(fd, "w") as handle:
        handle.write(secret + "\n")
    return path


def read(save_dir: Path | str, expected_digest: str) -> str | None:
    """The secret in the save folder if it is the one whose digest node 0's store published; else None (not there
    yet, still a previous run's, or not a plain file)."""
    path = Path(save_dir) / SECRET_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd) as handle:
        try:
            text = handle.read(256).strip()
        except (OSError, UnicodeDecodeError):
            return None
    return text if text and digest(text) == expected_digest else None
