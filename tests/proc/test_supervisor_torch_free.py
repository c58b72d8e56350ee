"""The supervisor's process never imports torch, nor anything of the agent's, the forkserver's, the store's or the
status tool's side: checked at run time, over a whole launch (init run, restructures, completion, metrics, doctor).

tests/unit/test_layers.py reads the imports; this runs them. An audit hook in pai-launch's own interpreter records
every module it imports, so a lazy import on a rare path that the code reading missed is still caught here.
"""

from __future__ import annotations

import json

from pai_launch.wire import log_events

#: Installed before pai-launch's entry point runs; appends each module the supervisor imports to OUT, one per line.
AUDITED_ENTRY = (
    "import sys\n"
    "out = open(sys.argv.pop(1), 'a', buffering=1)\n"
    "def hook(event, args):\n"
    "    if event == 'import':\n"
    "        out.write(args[0] + '\\n')\n"
    "sys.addaudithook(hook)\n"
    "sys.argv[0] = 'pai-launch'\n"
    "from pai_launch.entry import main\n"
    "main()\n"
)

REFUSED = ("torch", "perforatedai", "matplotlib", "pai_launch.agent", "pai_launch.forkserver", "pai_launch.store",
           "pai_launch.status", "pai_launch.training", "libcst", "pai_launch.fix")


def test_a_whole_launch_keeps_torch_and_the_other_processes_code_out_of_the_supervisor(scene):
    imported = scene.io / "imported.txt"
    launch = scene.start("--nproc", "2", "--metrics-port", "0", script_args=["--generations", "3"],
                         entry=("-c", AUDITED_ENTRY, str(imported)))
    assert launch.wait(120) == 0, launch.stderr
    finished = launch.event("run_finished")
    assert (finished["exit_code"], finished["generations"]) == (0, 3)
    logged = {event["event"] for event in launch.events()}
    assert logged - log_events.ALL == set() and {log_events.DENDRITES_ADDED, log_events.GENERATION_ENDED} <= logged
    modules = set(imported.read_text().split())
    # the hook saw them
    assert "pai_launch.supervise.loop.runner" in modules and "pai_launch.doctor.diagnose" in modules
    leaked = sorted(m for m in modules if any(m == name or m.startswith(name + ".") for name in REFUSED))
    assert leaked == [], json.dumps(leaked[:10])
