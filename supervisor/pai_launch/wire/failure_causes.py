"""What a failed rank's log tail says went wrong: the one line that explains, and the known PerforatedAI/DDP causes.

A crashing worker's last lines are mostly noise: faulthandler's dump of every thread's stack, the list of extension
modules, C++'s `terminate called` and its frame list. The line worth reporting is the `what():` of the C++ error or
the exception that ended the Python traceback. Some failures are common enough to name, with their fix and the id of
the `pai-launch doctor` check that finds them in the script before a run.

Pure: text in, text out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pai_launch.wire import failure_phase

#: torch's per-rank line prefix ("[rank3]:"), where a log prefix template adds one.
_PREFIX = re.compile(r"^\[(?:rank|default)\d*[^\]]*\]:\s?")
_NOISE = re.compile(
    r"^(?:Fatal Python error:|(?:Current thread|Thread) 0x[0-9a-fA-F]+|File \".*\", line \d+|Extension modules:"
    r"|terminate called|Exception raised from |frame #\d+:|Traceback \(most recent call last\):|<no Python frame>"
    r"|During handling of the above exception|The above exception was the direct cause|[\^~\s]+$|\.\.\.$)")
_FRAME = re.compile(r"^\s*File \".*\", line \d+")
_WHAT = re.compile(r"^\s*what\(\):\s*")
_FATAL = re.compile(r"^Fatal Python error:")


@dataclass(frozen=True)
class KnownCause:
    #: The cause's id: for a cause in the script, the `pai-launch doctor` check that finds it there.
    id: str
    #: What went wrong, in one sentence.
    name: str
    fix: str
    #: A `pai-launch doctor` check finds it in the script (else it comes from the machine, the GPU or the file).
    in_script: bool = True
    #: Retrying can help (a race, a slow peer, a GPU still held by another process): never "retrying cannot help".
    transient: bool = False


_BUFFERS = KnownCause(
    "ddp-broadcast-buffers",
    "DistributedDataParallel's buffer broadcast got buffers of another size (added dendrites change them per rank)",
    "pass broadcast_buffers=False (and find_unused_parameters=True) to DistributedDataParallel")
_PERFORATE = KnownCause(
    "perforate-model-race",
    "every rank ran UPA.perforate_model at once and one read SAVE/<save>_config.json while another rewrote it",
    "call it one rank at a time (for r in range(world): if r == rank: perforate; dist.barrier()), "
    "or use pai_launch.training.perforate_model(run, model, ...)", transient=True)
_VALIDATION = KnownCause(
    "validation-score-race",
    "a rank read SAVE/best_model.pt in add_validation_score while rank 0 rewrote it",
    "call it one rank at a time, rank 0 first, or use pai_launch.training.add_validation_score(run, score, model)",
    transient=True)
_WRAPPED_SCORE = KnownCause(
    "validation-score-wrapper",
    "add_validation_score was given the DistributedDataParallel wrapper: PerforatedAI printed \"Need to call .module "
    "when using add validation score\" and stopped in pdb, which quit on the closed stdin (bdb.BdbQuit)",
    "pass the model inside the wrapper: GPA.pai_tracker.add_validation_score(score, model.module)", in_script=False)
_PDB = KnownCause(
    "pdb-prompt",
    "PerforatedAI stopped in pdb.set_trace() (a setting it asks about was not confirmed) and pdb quit on the closed "
    "stdin (bdb.BdbQuit)",
    "confirm the settings before perforate_model: GPA.pc.set_unwrapped_modules_confirmed(True), "
    "set_weight_decay_accepted(True), set_configuration_confirmed(True), or "
    "pai_launch.training.configure_without_prompts",
    in_script=False)
_GROUP_TIMEOUT = KnownCause(
    "process-group-timeout",
    "the process group did not form in time (a peer slow to start, or NCCL failing to set up its connections)",
    "retried; if it repeats, check that every GPU is free and visible and raise init_process_group's timeout "
    "(NCCL_DEBUG=INFO says why NCCL failed)", in_script=False, transient=True)
_NCCL_SETUP = KnownCause(
    "nccl-error",
    "NCCL failed (a GPU in a bad state, a network error, or a peer that exited)",
    "retried; if it repeats, run with NCCL_DEBUG=INFO and check the GPUs (nvidia-smi) and the network between nodes",
    in_script=False, transient=True)
_COLLECTIVE_TIMEOUT = KnownCause(
    "nccl-collective-timeout",
    "a collective did not finish within the process group's timeout and NCCL's watchdog aborted the rank "
    "(SIGABRT: no finally ran and nothing was saved)",
    "retried; if it repeats, find the rank that stopped calling collectives (one that took another branch, or hung: "
    "--stall-timeout dumps every rank's stack), raise init_process_group(timeout=...) if a step is only slow, and on "
    "torch 2.15 try TORCH_DIST_USE_NCCL2=0 (the older NCCL backend)", in_script=False, transient=True)
_OUT_OF_MEMORY = KnownCause(
    "cuda-out-of-memory",
    "the GPU ran out of memory (at start-up: often another process still holds it)",
    "retried; if it repeats, free the GPU (nvidia-smi shows who holds it) or lower the batch size",
    in_script=False, transient=True)
_UNLOADABLE_FILE = KnownCause(
    "checkpoint-unloadable",
    "the checkpoint being loaded is torn, is not a checkpoint, or does not fit the model",
    "pai-launch moves such a switch file aside and resumes from the one before it", in_script=False)
_UNGUARDED = KnownCause(
    "init-process-group-unguarded",
    "init_process_group ran where torchrun set no RANK (in the init run, which is one plain process, or at import "
    "time)",
    "guard it: if not args.perforate_model_parallel: dist.init_process_group(...), or use pai_launch.training.start")
_NO_GROUP = KnownCause(
    "init-barrier-unguarded",
    "a torch.distributed call ran without a process group (in the init run, which has none)",
    "guard it: if args.distributed: ... (or leave it out of the init run)")

_INIT_FLAG = KnownCause(
    "flag-perforate-model-parallel",
    "the script's argparse does not accept --perforate_model_parallel, which pai-launch passes to the init run",
    'add parser.add_argument("--perforate_model_parallel", action="store_true")')
_LOAD_FLAG = KnownCause(
    "flag-pai-load-folder",
    "the script's argparse does not accept --pai_load_folder, which pai-launch passes on a restart (an option spelled "
    "--pai-load-folder does not take it)",
    'add parser.add_argument("--pai_load_folder", default=None) (or the underscore spelling as an alias)')

_UNRECOGNIZED = re.compile(r"error: unrecognized arguments:.*?(--perforate_model_parallel|--pai_load_folder)")
_MISMATCH = re.compile(r"Received data size doesn't match expected size|size mismatch|doesn't match expected size"
                       r"|op\.preamble\.length <= op\.nbytes", re.IGNORECASE)
#: gloo's own check on a collective whose sizes differ between ranks: under PerforatedAI, the buffer broadcast (the
#: C++ abort carries no Python frame to say so).
_GLOO_SIZES = re.compile(r"op\.preamble\.length <= op\.nbytes")
_GROUP_TIMEOUT_TEXT = re.compile(r"Timed out initializing process group|DistStoreError: Timed out|wait timeout after"
                                 r"|Socket Timeout|DistNetworkError")
_NCCL_TEXT = re.compile(r"NCCL error in|ncclUnhandledCudaError|ncclSystemError|ncclInternalError|ncclRemoteError")
#: NCCL's watchdog on a collective past its timeout (legacy ProcessGroupNCCL and NCCL2 alike), or its report of the
#: ranks that never joined.
_COLLECTIVE_TIMEOUT_TEXT = re.compile(r"Watchdog caught collective operation timeout|milliseconds before timing out"
                                      r"|Timeout at collective|lagging ranks that caused this timeout"
                                      r"|NCCL operation timed out")
#: A rank's own words that it failed because another process went away first: gloo's pair closed or reset by the
#: peer, NCCL's remote error, a communicator aborted for another rank's failure, the store's connection dropped.
_LOST_PEER_TEXT = re.compile(r"Connection closed by peer|Connection reset by peer|remote process exited"
                             r"|ncclRemoteError|NCCL communicator was aborted|Broken pipe.*(?:gloo|store|TCPStore)"
                             r"|(?:gloo|TCPStore).*Broken pipe")
_OOM_TEXT = re.compile(r"CUDA out of memory|OutOfMemoryError")
#: A worker's stdout lines worth reading beside its stderr: PerforatedAI prints its complaint there before pdb.
_STDOUT_TELLS = re.compile(r"Need to call \.module|^\(Pdb\)|^> .*\(\d+\)\S*\(\)$|^-> ")
_BUFFER_SYNC = re.compile(r"_sync_buffers|_sync_module_buffers|broadcast_coalesced|nn/parallel/distributed\.py")


def _plain(line: str) -> str:
    return _PREFIX.sub("", line)


def _noise(lines: list[str]) -> list[bool]:
    """For each line: True where it is a crash dump's noise (a traceback's source line after its File line too)."""
    marks = []
    for index, line in enumerate(lines):
        text = line.strip()
        follows_frame = index > 0 and _FRAME.match(lines[index - 1]) is not None and line[:1].isspace()
        marks.append(not text or follows_frame or _NOISE.match(text) is not None)
    return marks


def explaining_line(tail: str) -> str:
    """The line that says why the rank died: the C++ error's what(), else the exception ending the last traceback,
    else the last line that is not a dump's noise, else faulthandler's 'Fatal Python error' (all noise: the last
    line)."""
    lines = [_plain(line.rstrip()) for line in tail.splitlines()]
    whats = [line for line in lines if _WHAT.match(line) and _WHAT.sub("", line)]
    if whats:
        return whats[-1].strip()
    noise = _noise(lines)
    headers = [i for i, line in enumerate(lines) if line.strip() == "Traceback (most recent call last):"]
    if headers:
        ends = [i for i in range(headers[-1] + 1, len(lines)) if not noise[i] and not lines[i][:1].isspace()]
        if ends:
            return lines[ends[0]].strip()
    plain = [line for line, is_noise in zip(lines, noise) if not is_noise]
    if plain:
        return plain[-1].strip()
    fatal = [line for line in lines if _FATAL.match(line.strip())]
    rest = [line for line in lines if line.strip()]
    return (fatal or rest or [""])[-1].strip()


def known_cause(tail: str) -> KnownCause | None:
    """The known PerforatedAI/DDP failure the tail shows, if any."""
    unrecognized = _UNRECOGNIZED.search(tail)
    if unrecognized:
        return _INIT_FLAG if unrecognized.group(1) == "--perforate_model_parallel" else _LOAD_FLAG
    if re.search(r"environment variable \w+ expected, but not set", tail):
        return _UNGUARDED
    if (_MISMATCH.search(tail) and _BUFFER_SYNC.search(tail)) or _GLOO_SIZES.search(tail):
        return _BUFFERS
    if "JSONDecodeError" in tail and ("perforate_model" in tail or "_config.json" in tail or "load_config" in tail):
        return _PERFORATE
    if "KeyError" in tail and ("best_model" in tail or "add_validation_score" in tail):
        return _VALIDATION
    if "Need to call .module" in tail:
        return _WRAPPED_SCORE
    if "BdbQuit" in tail:
        return _PDB
    if re.search(r"[Dd]efault process group has not been initialized", tail):
        return _NO_GROUP
    if _OOM_TEXT.search(tail):
        return _OUT_OF_MEMORY
    if _GROUP_TIMEOUT_TEXT.search(tail):
        return _GROUP_TIMEOUT
    if _COLLECTIVE_TIMEOUT_TEXT.search(tail):
        return _COLLECTIVE_TIMEOUT
    if _NCCL_TEXT.search(tail):
        return _NCCL_SETUP
    if failure_phase.unloadable_line(tail):
        return _UNLOADABLE_FILE
    return None


def telling_stdout(lines: list[str], most: int = 6) -> list[str]:
    """The lines of a rank's stdout that explain a failure its stderr only shows the end of (PerforatedAI's message
    before its pdb prompt): the failure's tail gets them too."""
    return [line for line in lines if _STDOUT_TELLS.search(_plain(line).strip())][-most:]


def fields(tail: str) -> dict:
    """Log fields for a failure with this tail: the explaining line and, for a known cause, its name, fix and check."""
    if not tail.strip():
        return {}
    cause = known_cause(tail)
    found = {"log_line": explaining_line(tail)[:500]}
    if cause is not None:
        found.update(cause=cause.name, fix=cause.fix, doctor_id=cause.id)
    return found


def summary(tail: str) -> str:
    """': <cause> (pai-launch doctor check <id>; fix: <fix>)' for a known cause, else nothing: for a reason line."""
    cause = known_cause(tail)
    if cause is None:
        return ""
    check = f"pai-launch doctor check {cause.id}" if cause.in_script else cause.id
    return f": {cause.name} ({check}; fix: {cause.fix})"


def compact(lines: list[str]) -> list[str]:
    """The lines without the parts of a crash dump that push the explanation out of a short tail: other threads'
    stacks, the extension module list and C++ frame lists (the crashing thread's own frames stay)."""
    kept, other_thread = [], False
    for line in lines:
        text = _plain(line).strip()
        if re.match(r"^Thread 0x[0-9a-fA-F]+", text):
            other_thread = True
            continue
        if other_thread and (not text or _FRAME.match(_plain(line))):
            continue
        other_thread = False
        if text.startswith("Extension modules:") or re.match(r"^frame #\d+:", text):
            continue
        kept.append(line)
    return kept


#: The private folders pai-launch makes in the temporary folder: PRIVATE_FOLDER_PREFIX<pid>-<random> (linux.privatedir).
PRIVATE_FOLDER_PREFIX = "pai-launch-logs-"
#: Added to a launcher error when one of the run's private paths is gone (core.outcomes: a fault a retry can fix).
LOST_NOTE = "a private temporary folder of this run was removed"

def lost_private_file(detail: str) -> bool:
    """A launcher failure caused by a private file or folder of the run that went missing (pure: reads the text)."""
    if LOST_NOTE in detail:
        return True
    missing = "FileNotFoundError" in detail or "No such file or directory" in detail
    return missing and any(mark in detail for mark in (PRIVATE_FOLDER_PREFIX, "/pymp-"))


def lost_a_peer(tail: str) -> bool:
    """The rank's log says it stopped because a peer had gone (collateral): its failure is not the generation's cause
    while another rank's is, whatever order the exits were seen in (under load a collateral exit can be seen first)."""
    return _LOST_PEER_TEXT.search(tail) is not None
