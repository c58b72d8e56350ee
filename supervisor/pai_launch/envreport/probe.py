"""What the interpreter a run would use holds: its Python, the versions of torch, torchvision and perforatedai, and
what torch sees of CUDA. Printed as one JSON object, the last line of stdout.

Runs as `python -c <this file's source>` in that interpreter, which may not have pai-launch installed: so it imports
nothing of pai_launch. The working directory comes first on sys.path, as the script's folder does for a run, so a
local `torch.py` that would shadow torch shows here too (in torch's `file`). Anything torch prints while imported goes
to stderr, so stdout holds the JSON alone.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import sys

PACKAGES = ("torch", "torchvision", "perforatedai")


def package_versions(version=importlib.metadata.version) -> dict:
    """Distribution name -> installed version, None when not installed (read from the metadata, nothing imported)."""
    found = {}
    for name in PACKAGES:
        try:
            found[name] = version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def python_facts() -> dict:
    return {"executable": sys.executable, "version": platform.python_version(),
            "implementation": platform.python_implementation()}


def cudnn_text(number: int | None) -> str | None:
    """torch's cuDNN number as a version: 90100 -> '9.1.0' (cuDNN 9 on), 8902 -> '8.9.2' (before)."""
    if not number:
        return None
    if number >= 10000:
        return f"{number // 10000}.{number // 100 % 100}.{number % 100}"
    return f"{number // 1000}.{number // 100 % 10}.{number % 100}"


def torch_facts(torch) -> dict:
    """What an imported torch says of itself and of CUDA; each question that fails is answered by its error."""
    facts = {"version": str(torch.__version__), "file": getattr(torch, "__file__", None),
             "cuda": getattr(torch.version, "cuda", None), "cudnn": None, "nccl": None, "cuda_available": False,
             "gpus": [], "gpus_error": None, "distributed": {}}
    facts["cudnn"] = _answer(lambda: cudnn_text(torch.backends.cudnn.version()))
    facts["nccl"] = _answer(lambda: ".".join(map(str, torch.cuda.nccl.version())) if facts["cuda"] else None)
    facts["cuda_available"] = bool(_answer(torch.cuda.is_available))
    if facts["cuda_available"]:
        try:
            facts["gpus"] = [_gpu(torch, index) for index in range(torch.cuda.device_count())]
        except Exception as exc:  # noqa: BLE001 - a driver that fails is what the report is for
            facts["gpus_error"] = _error(exc)
    facts["distributed"] = {name: bool(_answer(check)) for name, check in _backends(torch).items()}
    facts["use_nccl2"] = os.environ.get("TORCH_DIST_USE_NCCL2")
    return facts


def _backends(torch) -> dict:
    distributed = getattr(torch, "distributed", None)
    if distributed is None or not _answer(distributed.is_available):
        return {"available": lambda: False}
    return {"available": lambda: True, "nccl": distributed.is_nccl_available, "gloo": distributed.is_gloo_available}


def _gpu(torch, index: int) -> dict:
    props = torch.cuda.get_device_properties(index)
    return {"index": index, "name": props.name, "memory_bytes": int(props.total_memory),
            "capability": f"{props.major}.{props.minor}"}


def _answer(question):
    """The question's answer, or None when asking fails (a CPU build has no NCCL to ask)."""
    try:
        return question()
    except Exception:  # noqa: BLE001 - an unanswered question is reported as unknown
        return None


def _error(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def gather() -> dict:
    facts = {"python": python_facts(), "packages": package_versions(), "torch": None, "torch_error": None}
    try:
        import torch
    except BaseException as exc:  # noqa: BLE001 - a torch that cannot be imported (or exits while importing) is a fact
        facts["torch_error"] = _error(exc)
        return facts
    facts["torch"] = torch_facts(torch)
    return facts


def main() -> None:
    out, sys.stdout = sys.stdout, sys.stderr  # whatever importing torch prints stays out of the JSON
    facts = gather()
    out.write(json.dumps(facts, sort_keys=True) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
