"""Write the names an installed perforatedai has, for doctor's perforatedai-api-missing check where no perforatedai
is installed (or only a compiled one of another version): supervisor/pai_launch/doctor/perforatedai_api.json.

Run it in an environment with perforatedai installed; unlike doctor, it imports the package:

    .venv/bin/python scripts/pai_api_names.py
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "supervisor" / "pai_launch" / "doctor" / "perforatedai_api.json"


def names() -> dict[str, object]:
    """{"version", "pc": GPA.pc's attributes, "tracker": PAINeuronModuleTracker's, "utils": utils_perforatedai's,
    "package": what `perforatedai.X` reaches (its modules, its own names), "answers": the prefixes GPA.pc answers for
    any name (3.2.9: a set_ or append_ it lacks is a no-op that prints "Ignoring set attempt.")}."""
    with open(os.devnull, "w") as quiet:  # the import prints a banner, and GPA.pc's __getattr__ a line per miss
        saved, sys.stdout = sys.stdout, quiet
        try:
            import perforatedai
            from perforatedai import globals_perforatedai as GPA
            from perforatedai import tracker_perforatedai as TPA
            from perforatedai import utils_perforatedai as UPA
            answers = [prefix for prefix in ("set_", "get_", "append_")
                       if hasattr(GPA.pc, prefix + "no_such_setting_anywhere")]
        finally:
            sys.stdout = saved
    public = lambda found: sorted(n for n in found if not n.startswith("_"))
    folder = Path(perforatedai.__file__).parent
    modules = {p.name.split(".")[0] for p in folder.iterdir() if p.suffix in (".py", ".so", ".pyd")}
    return {"version": importlib.metadata.version("perforatedai"),
            "pc": public(dir(GPA.pc)), "tracker": public(dir(TPA.PAINeuronModuleTracker)), "utils": public(dir(UPA)),
            "package": public(modules | set(dir(perforatedai))), "answers": answers}


def main() -> int:
    data = names()
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{OUT}: perforatedai {data['version']}, {len(data['pc'])} pc, {len(data['tracker'])} tracker, "
          f"{len(data['utils'])} utils names")
    return 0


if __name__ == "__main__":
    sys.exit(main())
