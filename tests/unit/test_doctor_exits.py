"""doctor: restructures handled in process by hand, exits a script disables, and a process group guarded the way
torchvision's reference scripts guard it. Scripts are variants of tests/doctor_scripts/good/minimal_ddp.py, read
with ast, never run."""

from __future__ import annotations

from pathlib import Path

import pytest

from pai_launch.doctor.diagnose import check_script, render_text

pytestmark = pytest.mark.timeout(60)

GOOD = Path(__file__).resolve().parents[1] / "doctor_scripts" / "good" / "minimal_ddp.py"

END = '''    if complete:
        if rank == 0:
            with open(os.path.join(args.save, ".training_complete"), "w") as marker:
                marker.write("complete\\n")
    if complete or restructured:
        if distributed:
            dist.barrier()
            dist.destroy_process_group()
        sys.exit(0)
'''

HELPERS = '''def build_optimizer(net):
    return GPA.pai_tracker.setup_optimizer(net, {"params": net.parameters(), "lr": 0.1}, {})


def load_restructured(net):
    if not os.path.exists(args.save):
        sys.exit(1)
    return UPA.load_system(net, args.save, "best_model", True)


GPA.pc.set_configuration_confirmed(True)
'''

REWRAP_THEN_COMPLETE = '''    if restructured:
        net = load_restructured(net)
        model = nn.parallel.DistributedDataParallel(net, find_unused_parameters=True, broadcast_buffers=False)
        optimizer, scheduler = build_optimizer(net)
    if complete:
        if rank == 0:
            with open(os.path.join(args.save, ".training_complete"), "w") as marker:
                marker.write("complete\\n")
        if distributed:
            dist.barrier()
            dist.destroy_process_group()
        sys.exit(0)
'''


def variant(folder: Path, *changes: tuple[str, str], name: str = "train.py") -> Path:
    text = GOOD.read_text()
    for old, new in changes:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = folder / name
    path.write_text(text)
    return path


def found(script: Path) -> set[tuple[str, str, int | None]]:
    report = check_script(script)
    return {(f.id, f.severity, f.line) for f in report.findings}


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_a_restructure_rebuilt_in_process_before_the_completion_check_is_clean(tmp_path):
    """`if restructured:` reloads through a helper that returns the model (and exits only on a failure), re-wraps
    and builds a new optimizer; `if complete:` right after ends the run. The helpers' returns hand values back, and
    their sys.exit(1) is a failure: nothing leaves the generation before completion is checked."""
    script = variant(tmp_path, ("GPA.pc.set_configuration_confirmed(True)\n", HELPERS), (END, REWRAP_THEN_COMPLETE))
    report = check_script(script)
    assert report.findings == (), render_text(report)


def test_a_restructure_that_leaves_before_the_completion_check_is_still_an_error(tmp_path):
    leaving = REWRAP_THEN_COMPLETE.replace("        optimizer, scheduler = build_optimizer(net)\n",
                                           "        optimizer, scheduler = build_optimizer(net)\n"
                                           "        dist.barrier()\n        dist.destroy_process_group()\n"
                                           "        sys.exit(0)\n")
    script = variant(tmp_path, ("GPA.pc.set_configuration_confirmed(True)\n", HELPERS), (END, leaving))
    assert ("restructured-before-complete", "error", line_of(script, "    if restructured:")) in found(script)


def test_a_main_that_returns_on_a_restructure_still_leaves(tmp_path):
    """A return from the function the module calls on its own (`main()`) ends the script."""
    script = tmp_path / "train.py"
    text = GOOD.read_text()
    body = text[text.index("while True:"):]
    body = body.replace(END, '''    if restructured:
        if distributed:
            dist.barrier()
            dist.destroy_process_group()
        return 0
    if complete:
        if rank == 0:
            with open(os.path.join(args.save, ".training_complete"), "w") as marker:
                marker.write("complete\\n")
        if distributed:
            dist.barrier()
            dist.destroy_process_group()
        return 0
''')
    main = "def main():\n    global model\n" + "".join("    " + line + "\n" if line else "\n"
                                                     for line in body.splitlines())
    script.write_text(text[:text.index("while True:")] + main + "\n\nif __name__ == '__main__':\n"
                      "    sys.exit(main())\n")
    assert ("restructured-before-complete", "error", line_of(script, "    if restructured:")) in found(script), \
        render_text(check_script(script))


NOOP_HELPER = '''import builtins


def disable_interactive_breakpoints():
    """Keep PerforatedAI's pdb prompts from stopping a run."""
    import pdb
    pdb.set_trace = lambda *a, **k: None
    builtins.breakpoint = lambda *a, **k: None
    sys.exit = lambda *a, **k: None
    builtins.exit = builtins.quit = lambda *a, **k: None


'''


def test_a_project_helper_that_disables_the_exits_is_an_error_at_its_call(tmp_path):
    (tmp_path / "pai_helpers.py").write_text("import sys\n" + NOOP_HELPER)
    script = variant(tmp_path, ("import torch\n", "import torch\n"
                                "from pai_helpers import disable_interactive_breakpoints\n"),
                     ("GPA.pc.set_configuration_confirmed(True)\n",
                      "disable_interactive_breakpoints()\nGPA.pc.set_configuration_confirmed(True)\n"))
    report = check_script(script)
    call = line_of(script, "disable_interactive_breakpoints()")
    # one finding at the call, for sys.exit (which the script calls; builtins.exit and quit it never calls)
    assert [(f.id, f.severity, f.line, f.path) for f in report.findings] == [
        ("exits-disabled", "error", call, str(script))], render_text(report)
    first = report.findings[0]
    assert first.message.startswith("sys.exit = lambda *a, **k: None replaces the exit")
    assert f"disable_interactive_breakpoints() does it at {tmp_path / 'pai_helpers.py'}:" in first.message
    assert "PYTHONBREAKPOINT=0" in first.fix and "pdb.set_trace" in first.fix


@pytest.mark.parametrize("inline, expected", [
    ("sys.exit = lambda *a: None\n", "error"),
    ('setattr(sys, "exit", lambda code=0: print("exit", code))\n', "error"),
    ("def _no_exit(code=0):\n    print('not exiting', code)\n\n\nsys.exit = _no_exit\n", "error"),
    ("if args.debug:\n    sys.exit = lambda *a: None\n", "warning"),  # a condition doctor cannot read
    ("builtins.exit = lambda *a: None\n", None),  # the script never calls exit(): nothing falls through
    ("if not distributed and not init_run:\n    sys.exit = lambda *a: None\n", None),  # a plain process only
    ("def _hard_exit(code=0):\n    os._exit(code)\n\n\nsys.exit = _hard_exit\n", None),  # still an exit
    ("builtins.breakpoint = lambda *a: None\n", None),
    ("sys.exit = make_exit()\n", None),  # unreadable: not reported
], ids=["lambda", "setattr", "def", "conditional", "builtins-exit-unused", "single-process-only", "os-exit",
        "breakpoint-only",
        "unreadable"])
def test_exits_replaced_inline(tmp_path, inline, expected):
    script = variant(tmp_path, ("import torch\n", "import builtins\n\nimport torch\n"),
                     ("GPA.pc.set_configuration_confirmed(True)\n", inline
                      + "GPA.pc.set_configuration_confirmed(True)\n"))
    if expected is None:
        assert found(script) == set(), render_text(check_script(script))
        return
    line = next(n for n, text in enumerate(script.read_text().splitlines(), 1)
                if "exit" in text and ("= " in text or "setattr" in text) and "distributed" not in text)
    assert found(script) == {("exits-disabled", expected, line)}, render_text(check_script(script))


TORCHVISION_UTILS = '''import os

import torch
import torch.distributed as dist


def init_distributed_mode(args):
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        args.rank = int(os.environ["RANK"])
        args.world_size = int(os.environ["WORLD_SIZE"])
        args.gpu = int(os.environ["LOCAL_RANK"])
    elif "SLURM_PROCID" in os.environ:
        args.rank = int(os.environ["SLURM_PROCID"])
        args.gpu = args.rank % torch.cuda.device_count()
    else:
        print("Not using distributed mode")
        args.distributed = False
        return

    args.distributed = True

    torch.cuda.set_device(args.gpu)
    args.dist_backend = "nccl"
    print(f"| distributed init (rank {args.rank}): {args.dist_url}", flush=True)
    dist.init_process_group(
        backend=args.dist_backend, init_method=args.dist_url, world_size=args.world_size, rank=args.rank
    )
    dist.barrier()
'''

SET_UP = ('distributed = not init_run and "WORLD_SIZE" in os.environ\nif distributed:\n'
          '    dist.init_process_group("gloo")\n')


@pytest.mark.parametrize("returns", [True, False], ids=["returns", "goes-on"])
def test_torchvision_style_init_distributed_mode_guards_its_process_group(tmp_path, returns):
    """utils.init_distributed_mode(args): the else branch's return keeps a plain process (the init run) away from
    init_process_group and the barrier after it."""
    utils = TORCHVISION_UTILS if returns else TORCHVISION_UTILS.replace("        return\n", "")
    (tmp_path / "utils.py").write_text(utils)
    script = variant(tmp_path, ("import torch\n", "import torch\n\nimport utils\n"),
                     ('parser.add_argument("--save", default="PAI")\n',
                      ('parser.add_argument("--save", default="PAI")\nparser.add_argument("--dist-url", '
                      'default="env://")\n')),
                     (SET_UP, "utils.init_distributed_mode(args)\ndistributed = args.distributed\n"))
    report = check_script(script)
    group = line_of(tmp_path / "utils.py", "dist.init_process_group(")
    if returns:
        assert report.findings == (), render_text(report)
    else:  # rank= is passed: doctor cannot be sure the init run gets there without RANK
        assert {(f.id, f.severity, f.line) for f in report.findings} == {
            ("init-process-group-unguarded", "warning", group)}, render_text(report)


HASATTR = ('    elif "SLURM_PROCID" in os.environ:\n', ('    elif hasattr(args, "rank"):\n        pass\n'
           '    elif "SLURM_PROCID" in os.environ:\n'))


@pytest.mark.parametrize("script_change, expected", [
    (None, set()),  # no option declares rank, nothing set it before: the branch is never taken
    (('parser.add_argument("--save", default="PAI")\n',
      'parser.add_argument("--save", default="PAI")\nparser.add_argument("--rank", type=int)\n'), {"warning"}),
    (("utils.init_distributed_mode(args)\n", "args.rank = 0\nutils.init_distributed_mode(args)\n"), {"warning"}),
], ids=["never-there", "declared-option", "assigned-before"])
def test_torchvision_hasattr_rank_branch(tmp_path, script_change, expected):
    """torchvision's own init_distributed_mode also has `elif hasattr(args, "rank"): pass`, which goes on to
    init_process_group: only where args may have a rank."""
    (tmp_path / "utils.py").write_text(TORCHVISION_UTILS.replace(*HASATTR))
    changes = [("import torch\n", "import torch\n\nimport utils\n"),
               ('parser.add_argument("--save", default="PAI")\n',
                'parser.add_argument("--save", default="PAI")\nparser.add_argument("--dist-url", default="env://")\n'),
               (SET_UP, "utils.init_distributed_mode(args)\ndistributed = args.distributed\n")]
    script = variant(tmp_path, *changes)
    if script_change is not None:
        text = script.read_text()
        assert text.count(script_change[0]) == 1
        script.write_text(text.replace(*script_change))
    report = check_script(script)
    assert {f.severity for f in report.findings if f.id == "init-process-group-unguarded"} == expected, \
        render_text(report)
    assert {f.id for f in report.findings} <= {"init-process-group-unguarded"}
