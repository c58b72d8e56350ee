"""Which process-group backends carry CUDA tensors: every name torch gives NCCL.

torch 2.15 made `nccl` mean ProcessGroupNCCL2 and named the others `nccl2`, `nccl-legacy` and `nccl-lazy`; a backend
string may also map devices to backends (`cpu:gloo,cuda:nccl`). A collective on any NCCL backend takes tensors on
the rank's GPU, and the rank's device is best bound when the group starts (init_process_group's device_id: without
it NCCL2 guesses the device from LOCAL_RANK). Pure and stdlib only, so a worker imports it for free.
"""

from __future__ import annotations

#: The NCCL backends torch names (2.15); `nccl` alone is the one every torch has.
NCCL_NAMES = ("nccl", "nccl2", "nccl-legacy", "nccl-lazy")


def uses_nccl(backend: object) -> bool:
    """True where `backend` (a name, or a `device:name,...` map as get_backend() returns it) runs on NCCL."""
    for part in str(backend).lower().split(","):
        name = part.rsplit(":", 1)[-1].strip()
        if name in NCCL_NAMES or name.startswith("nccl"):
            return True
    return False


def group_kind(group: object) -> str | None:
    """The class of NCCL backend a process group runs on (ProcessGroupNCCL, ProcessGroupNCCL2), else None: which
    NCCL torch picked for `nccl` (TORCH_DIST_USE_NCCL2 decides on 2.14 and 2.15)."""
    try:
        import torch

        backend = group._get_backend(torch.device("cuda"))  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - no CUDA backend on this group, or a torch without the call
        return None
    return type(backend).__name__


def torch_release(version: str) -> tuple[int, int]:
    """'2.15.0+cu132' -> (2, 15); a pre-release's letters are dropped ('2.16.0a0' -> (2, 16))."""
    parts = (version.split("+")[0].split(".") + ["0", "0"])[:2]
    return int("".join(c for c in parts[0] if c.isdigit()) or 0), int("".join(c for c in parts[1] if c.isdigit()) or 0)


def nccl_meaning(torch_version: str, use_nccl2: str | None) -> str:
    """What the backend name `nccl` builds on this torch with this TORCH_DIST_USE_NCCL2: NCCL2 by default from 2.15
    (0 rolls back), only when asked for on 2.14 (1), the one NCCL before that."""
    release = torch_release(torch_version)
    if release >= (2, 15):
        if use_nccl2 == "0":
            return "ProcessGroupNCCL (TORCH_DIST_USE_NCCL2=0; NCCL2 is this torch's default)"
        return "ProcessGroupNCCL2 (this torch's default; TORCH_DIST_USE_NCCL2=0 rolls back to ProcessGroupNCCL)"
    if release >= (2, 14):
        if use_nccl2 == "1":
            return "ProcessGroupNCCL2 (TORCH_DIST_USE_NCCL2=1; ProcessGroupNCCL is this torch's default)"
        return "ProcessGroupNCCL (this torch's default; TORCH_DIST_USE_NCCL2=1 tries NCCL2)"
    return "ProcessGroupNCCL"
