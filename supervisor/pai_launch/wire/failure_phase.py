"""Where in a worker's life it failed, read from its output: importing, joining the process group, perforate_model,
loading the switch file, training, or tearing down; and whether the output proves the switch file cannot be loaded.

Recovery decides from this evidence, not from timing: a switch file is moved aside only when a rank failed in loading
it with an error that says the file is bad, and a crash with a phase of training is never "before training started".
Pure: text in, values out. The markers are torch's, safetensors' and PerforatedAI's own words and frame names.
"""

from __future__ import annotations

import re
from enum import Enum


class Phase(Enum):
    UNKNOWN = "unknown"
    IMPORT = "import"
    PROCESS_GROUP = "process group"
    PERFORATE = "perforate_model"
    LOAD = "loading the switch file"
    TRAINING = "training"
    TEARDOWN = "teardown"


#: Lines that say a checkpoint file itself cannot be read or does not fit the model.
_UNLOADABLE = re.compile(
    r"PytorchStreamReader failed|SafetensorError|Error\(s\) in loading state_dict|failed finding central directory"
    r"|_pickle\.UnpicklingError|invalid load key|Error while deserializing header|incomplete metadata|header too small")

#: (phase, marker) in the order they are tried on each line; a line takes the first phase whose marker it holds.
_MARKERS: tuple[tuple[Phase, re.Pattern], ...] = (
    (Phase.TRAINING, re.compile(
        r"add_validation_score|Need to call \.module|\.backward\(|in backward$|_engine_run_backward|optimizer\.step"
        r"|_sync_buffers|_sync_module_buffers|Watchdog caught collective operation timeout|op\.preamble\.length"
        r"|Received data size doesn't match expected size")),
    (Phase.LOAD, re.compile(
        r"load_system|load_net\b|torch/serialization\.py|safetensors/torch\.py|safe_open|load_newest|load_state_dict"
        r"|" + _UNLOADABLE.pattern)),
    (Phase.PERFORATE, re.compile(r"perforate_model|convert_network|initialize_pai|sync_config_sources|load_config")),
    (Phase.PROCESS_GROUP, re.compile(
        r"init_process_group|store based barrier|_store_based_barrier|DistStoreError|DistNetworkError|TCPStore"
        r"|rendezvous|NCCL error in|ncclUnhandled|ncclSystemError|ncclInternalError|ncclInvalidUsage|ncclRemoteError")),
    (Phase.IMPORT, re.compile(r"^(?:\w+\.)*(?:ModuleNotFoundError|ImportError)\b|<frozen importlib")),
    (Phase.TEARDOWN, re.compile(r"destroy_process_group|in _run_exitfuncs|atexit")),
)
_PREFIX = re.compile(r"^\[(?:rank|default)\d*[^\]]*\]:\s?")


def _lines(tail: str) -> list[str]:
    return [_PREFIX.sub("", line).strip() for line in tail.splitlines() if line.strip()]


def phase_of(tail: str) -> Phase:
    """TRAINING when any line shows training (a checkpoint read inside add_validation_score is training's, not the
    switch file's); else the phase of the innermost marked line (a traceback lists the outermost frame first)."""
    found = Phase.UNKNOWN
    for line in _lines(tail):
        for phase, marker in _MARKERS:
            if marker.search(line):
                if phase is Phase.TRAINING:
                    return phase
                found = phase
                break
    return found


def unloadable_line(tail: str) -> str | None:
    """The line proving that the file being loaded is bad (torn, not a checkpoint, or not this model's), when the
    failure is in loading it; None otherwise (a read of best_model.pt during training proves nothing of the switch)."""
    if phase_of(tail) is not Phase.LOAD:
        return None
    proofs = [line for line in _lines(tail) if _UNLOADABLE.search(line)]
    return proofs[-1][:300] if proofs else None
