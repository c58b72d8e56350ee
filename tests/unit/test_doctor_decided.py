"""doctor: code that never runs. An `if` whose test a constant decides (`args.distributed = False` kept from
torchvision's reference, then `if args.distributed:`), and code after an unconditional exit, are not walked, so a
single-process script that keeps DDP code it never runs raises no DDP findings. Anything that may change the
constant keeps the test unknown. Scripts are read with ast, never run."""

from __future__ import annotations

from pathlib import Path

import pytest

from pai_launch.doctor.diagnose import check_script, render_text

pytestmark = pytest.mark.timeout(60)

OFF = Path(__file__).resolve().parents[1] / "doctor_scripts" / "projects" / "distributed_off" / "train.py"
CONSTANT = "    args.distributed = False\n"


def variant(folder: Path, *changes: tuple[str, str], base: Path = OFF) -> Path:
    text = base.read_text()
    for old, new in changes:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = folder / "train.py"
    path.write_text(text)
    return path


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def found(script: Path) -> list[tuple[str, str, int | None]]:
    report = check_script(script)
    return [(f.id, f.severity, f.line) for f in report.findings]


def ddp_findings(script: Path) -> list[tuple[str, str, int]]:
    """What doctor says of the script as a DDP script: the reference's DDP code is then live."""
    wrap, score = line_of(script, "DistributedDataParallel("), line_of(script, "add_validation_score(")
    end = line_of(script, "            return")
    return [("perforate-model-race", "error", line_of(script, "UPA.perforate_model(")),
            ("ddp-find-unused-parameters", "error", wrap), ("ddp-broadcast-buffers", "error", wrap),
            ("validation-score-race", "warning", score),
            ("restructure-no-exit", "warning", line_of(script, "if restructured and not complete:")),
            ("marker-every-rank", "warning", line_of(script, 'with open(os.path.join(args.save, ".training_')),
            ("generation-end-barrier", "warning", end), ("generation-end-destroy", "warning", end)]


def test_ddp_code_a_constant_switches_off_is_not_read():
    report = check_script(OFF)
    assert report.findings == (), render_text(report)
    assert any(note.startswith("DDP checks skipped") for note in report.notes)


@pytest.mark.parametrize("change", [
    (CONSTANT, "    args.distributed = True\n"),  # decided the other way: the DDP code always runs
    (CONSTANT, ""),  # the reference as written: a flag doctor cannot read
    (CONSTANT, CONSTANT + "    utils.init_distributed_mode(args)\n"),  # a library may set it
    (CONSTANT, CONSTANT + "    init_distributed_mode(args)\n"),  # a project function that sets it
    (CONSTANT, CONSTANT + '    setattr(args, "distributed", "RANK" in os.environ)\n'),
    (CONSTANT, CONSTANT + '    vars(args).update(distributed="RANK" in os.environ)\n'),
    (CONSTANT, CONSTANT + '    args.distributed |= "RANK" in os.environ\n'),
    (CONSTANT, CONSTANT + '    if "RANK" in os.environ:\n        args.distributed = True\n'),
    (CONSTANT, '    if not args.gpu:\n        args.distributed = False\n'),  # not on every path
    (CONSTANT, CONSTANT + "    settings = args\n"),  # the object held elsewhere
    (CONSTANT, CONSTANT + '    def enable():\n        args.distributed = True\n'),  # a closure may set it
], ids=["true", "unset", "library-call", "project-call", "setattr", "vars", "augmented", "conditional-set",
        "conditional-constant", "alias", "closure"])
def test_anything_that_may_change_the_constant_keeps_the_ddp_code(tmp_path, change):
    helper = ('def init_distributed_mode(args):\n    args.distributed = "RANK" in os.environ\n\n\n'
              'def load_data(args):\n')
    script = variant(tmp_path, change, ("import torch\n", "import torch\nimport utils\n"),
                     ("def load_data(args):\n", helper))
    assert found(script) == ddp_findings(script), render_text(check_script(script))


def test_a_constant_name_decides_its_ifs_and_a_loop_that_changes_it_does_not(tmp_path):
    """`distributed = False` decides `if distributed:`; set again later in the loop around the test, it does not."""
    script = variant(tmp_path, (CONSTANT, "    distributed = False\n"),
                     ("    if args.distributed and args.sync_bn:", "    if distributed and args.sync_bn:"),
                     ("    if args.distributed:\n", "    if distributed:\n"))
    assert found(script) == []
    looped = variant(tmp_path, (CONSTANT, "    distributed = False\n"),
                     ("    if args.distributed and args.sync_bn:", "    if distributed and args.sync_bn:"),
                     ("    model_without_ddp = model\n    if args.distributed:\n",
                      "    model_without_ddp = model\n    for attempt in range(2):\n        if distributed:\n    "),
                     ("        model_without_ddp = model.module\n",
                      "            model_without_ddp = model.module\n        distributed = True\n"))
    assert found(looped) == ddp_findings(looped), render_text(check_script(looped))


def test_a_function_handed_the_object_that_only_reads_it_leaves_the_constant(tmp_path):
    """load_data(args) reads args.ra_sampler (hasattr, attribute reads): the constant still decides the DDP if."""
    script = variant(tmp_path, ("    dataset, sampler = load_data(args)\n",
                                "    dataset, sampler = load_data(args)\n    print(args)\n"))
    assert found(script) == []


PLAIN = "    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)\n"


@pytest.mark.parametrize("before, dead", [
    ("    sys.exit()\n", True),  # a debugging exit left in: nothing after it runs
    ("    return\n", True),
    ('    raise SystemExit("stop")\n', True),
    ("    if args.gpu:\n        sys.exit()\n", False),  # may not exit
    ("    sys.exit = lambda *a: None\n    sys.exit()\n", False),  # an exit that returns
], ids=["sys-exit", "return", "raise", "conditional", "replaced-exit"])
def test_code_after_an_unconditional_exit_is_not_read(tmp_path, before, dead):
    script = variant(tmp_path, ("    GPA.pai_tracker.set_optimizer(torch.optim.SGD)\n"
                                "    optimizer, scheduler = GPA.pai_tracker.setup_optimizer(model, {\"params\": "
                                "model.parameters(), \"lr\": 0.1}, {})\n", before + PLAIN),
                     ("            optimizer, scheduler = GPA.pai_tracker.setup_optimizer(model, {\"params\": "
                      "model.parameters(), \"lr\": 0.1}, {})\n", "            optimizer = torch.optim.Adam("
                      "model.parameters(), lr=0.1)\n"))
    adam = line_of(script, PLAIN.strip())
    findings = [f for f in found(script) if f[0] == "optimizer-not-from-tracker"]
    if dead:  # no optimizer is built: the finding names no line
        assert findings == [("optimizer-not-from-tracker", "error", None)]
    else:
        assert findings == [("optimizer-not-from-tracker", "error", adam)]


LOAD = ('        newest = max(glob.glob(os.path.join(args.pai_load_folder, "switch_*.pt")), key=os.path.getmtime)\n'
        '        model = UPA.load_system(model, args.pai_load_folder, os.path.basename(newest)[:-3], True)\n')
LATEST = '        model = UPA.load_system(model, args.pai_load_folder, "latest", True)\n'


def test_resuming_from_latest_matters_only_to_a_ddp_script(tmp_path):
    """A single process restructures in place; only DDP generations resume (resume-missing asks the same)."""
    assert found(variant(tmp_path, (LOAD, LATEST))) == []
    script = variant(tmp_path, (LOAD, LATEST), (CONSTANT, ""))
    latest = ("resume-from-latest", "warning", line_of(script, '"latest"'))
    assert found(script) == sorted(ddp_findings(script) + [latest], key=lambda f: f[2])
