"""A small project for doctor --fix's tests: minimal_ddp.py with its DistributedDataParallel built in a helper file
(utils/ddp.py) that leaves broadcast_buffers at its default, so the finding, and its fix, is in the helper."""

from __future__ import annotations

from pathlib import Path

from tests.unit.doctor_mutations import BASE

DDP_LINE = ("        model = nn.parallel.DistributedDataParallel(model, find_unused_parameters=True, "
            "broadcast_buffers=False)\n")


def write_helper_project(folder: Path) -> tuple[Path, Path]:
    """FOLDER/train.py and FOLDER/utils/ddp.py, as (script, helper)."""
    (folder / "utils").mkdir()
    (folder / "utils" / "__init__.py").write_text("")
    helper = folder / "utils" / "ddp.py"
    helper.write_text("import torch.nn as nn\n\n\ndef wrap(model):\n    # the helper's own comment\n"
                      "    return nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)\n")
    script = folder / "train.py"
    script.write_text(BASE.read_text().replace(DDP_LINE, "        model = wrap(model)\n")
                      .replace("import argparse\n", "import argparse\n\nfrom utils.ddp import wrap\n"))
    return script, helper
