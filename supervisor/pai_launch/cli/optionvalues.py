"""Option values as typed turned into what they mean: the parser and converters the option declarations
(cli.declared) name."""

from __future__ import annotations

#: --nproc's words, as torchrun's --nproc-per-node takes them: every visible GPU; the GPUs, else every CPU; every CPU.
NPROC_WORDS = ("gpu", "auto", "cpu")


def parse_nproc(text: str) -> int | str:
    """--nproc as typed: a number, or one of NPROC_WORDS; ValueError (typer's "Invalid value") for anything else."""
    word = text.strip().lower()
    if word in NPROC_WORDS:
        return word
    if word.isascii() and word.lstrip("-").isdigit():
        return int(word)
    raise ValueError(f"{text!r} is not a number of workers: give N, gpu, auto or cpu")


def module_names(text: str | None) -> tuple[str, ...] | None:
    """--preload's comma-separated list; empty items are dropped, so "" preloads nothing; None: not given."""
    if text is None:
        return None
    return tuple(name.strip() for name in text.split(",") if name.strip())


def word(text: str) -> str:
    """A choice as typed, in any case and with spaces around it."""
    return text.strip().lower()


def arguments(given: list[str] | None) -> tuple[str, ...]:
    return tuple(given or ())
