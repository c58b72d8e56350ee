"""doctor on DDP scripts that restructure in their own process, as real ones write it: rank 0 scores and broadcasts
the flags, every rank reloads and builds DDP again under `if restructured:`, the loop checks training_complete
after. Scripts are variants of tests/doctor_scripts/good/minimal_ddp.py, read with ast, never run."""

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

#: the flags broadcast from rank 0; on a restructure a reload that waits for the file in a retry loop with a break,
#: then DDP and the optimizer built again; the completion check comes after
IN_PROCESS = '''    if distributed:
        flags = [restructured, complete]
        dist.broadcast_object_list(flags, src=0)
        restructured, complete = flags
        if restructured:
            dist.barrier()
            for attempt in range(5):
                if os.path.exists(os.path.join(args.save, "latest.pt")):
                    break
            net = UPA.load_system(net, args.save, "latest", True)
    if restructured:
        optimizer, scheduler = GPA.pai_tracker.setup_optimizer(net, {"params": net.parameters(), "lr": 0.1}, {})
        if distributed:
            model = nn.parallel.DistributedDataParallel(net, find_unused_parameters=True, broadcast_buffers=False)
    if complete:
        if rank == 0:
            with open(os.path.join(args.save, ".training_complete"), "w") as marker:
                marker.write("complete\\n")
        break
if distributed:
    dist.barrier()
    dist.destroy_process_group()
'''


def variant(folder: Path, *changes: tuple[str, str]) -> Path:
    text = GOOD.read_text()
    for old, new in changes:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = folder / "train.py"
    path.write_text(text)
    return path


def found(script: Path) -> set[tuple[str, str, int | None]]:
    return {(f.id, f.severity, f.line) for f in check_script(script).findings}


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_a_retry_loops_break_under_if_restructured_does_not_leave_the_generation(tmp_path):
    """The break leaves only the loop that waits for latest.pt: the restructure is handled in process, and the
    completion check after it is in time."""
    script = variant(tmp_path, (END, IN_PROCESS))
    assert {f for f in found(script) if f[1] == "error"} == set(), render_text(check_script(script))


def test_a_break_out_of_the_training_loop_under_if_restructured_still_comes_before_complete(tmp_path):
    script = variant(tmp_path, (END, IN_PROCESS.replace("            net = UPA.load_system(net, args.save, \"latest\", "
                                                        "True)\n",
                                                        "            net = UPA.load_system(net, args.save, \"latest\", "
                                                        "True)\n"
                                                        "            break\n")))
    assert ("restructured-before-complete", "error", line_of(script, "        if restructured:")) in found(script), \
        render_text(check_script(script))


AT_ONCE = ("model = in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), save_name=args.save))\n",
           "model = UPA.perforate_model(nn.Linear(8, 2), save_name=args.save)\n")
REPERFORATE = ('            net = UPA.load_system(net, args.save, "latest", True)\n',
               '            if not has_dendrites(net):\n'
               '                net = UPA.perforate_model(net, save_name=args.save)\n'
               '            net = UPA.load_system(net, args.save, "latest", True)\n')


def races(script: Path) -> list[tuple[str, str, int | None, str]]:
    return [(f.id, f.severity, f.line, f.message) for f in check_script(script).findings
            if f.id == "perforate-model-race"]


def test_perforating_again_in_the_loop_is_the_start_ups_race_named_once(tmp_path):
    """All ranks perforate at start-up, and again in the loop where the model lacks dendrites: one race, at the
    start-up, naming the loop's call."""
    script = variant(tmp_path, (END, IN_PROCESS), AT_ONCE)
    text = script.read_text().replace(*REPERFORATE)
    script.write_text(text)
    again = line_of(script, "net = UPA.perforate_model(net")
    [(ident, severity, line, message)] = races(script)
    assert (ident, severity, line) == ("perforate-model-race", "error", line_of(script, "model = UPA.perforate_model("))
    assert message.endswith(f"; the same race at line {again} (again in a loop after it)")


def test_perforating_in_both_branches_of_an_if_is_one_race_named_once(tmp_path):
    """Only one branch runs: one race, at the first call, naming the other (a resume branch and a fresh start)."""
    script = variant(tmp_path, AT_ONCE[:1] + (
        "if args.pai_load_folder:\n    model = UPA.perforate_model(nn.Linear(8, 2), save_name=args.save)\n"
        "else:\n    model = UPA.perforate_model(nn.Linear(8, 2), save_name=args.save)\n",))
    first = line_of(script, "model = UPA.perforate_model(")
    [(ident, severity, line, message)] = races(script)
    assert (ident, severity, line) == ("perforate-model-race", "error", first)
    assert message.endswith(f"; the same race at line {first + 2} (the other branch of its if)")


def test_perforating_twice_one_after_the_other_is_two_races(tmp_path):
    script = variant(tmp_path, AT_ONCE[:1] + (
        "model = UPA.perforate_model(nn.Linear(8, 2), save_name=args.save)\n"
        "model = UPA.perforate_model(model, save_name=args.save)\n",))
    first = line_of(script, "model = UPA.perforate_model(")
    assert [r[:3] for r in races(script)] == [("perforate-model-race", "error", first),
                                              ("perforate-model-race", "error", first + 1)]


def test_a_loops_perforation_after_a_start_up_in_turn_is_its_own_race(tmp_path):
    script = variant(tmp_path, (END, IN_PROCESS))
    script.write_text(script.read_text().replace(*REPERFORATE))
    assert [r[:3] for r in races(script)] == [
        ("perforate-model-race", "error", line_of(script, "net = UPA.perforate_model(net"))]


NO_EXIT_CALLED = ("            sys.exit(0)\n", "            raise SystemExit(0)\n")
DISABLED = ("GPA.pc.set_configuration_confirmed(True)\n",
            "def quiet():\n    sys.exit = lambda *a, **k: None\n\n\n"
            "quiet()\nGPA.pc.set_configuration_confirmed(True)\n")


def test_a_disabled_sys_exit_the_script_never_calls_still_swallows_perforatedais_exits(tmp_path):
    """PerforatedAI ends the process with sys.exit on its own fatal problems: a warning, with that reason."""
    script = variant(tmp_path, (END, IN_PROCESS), NO_EXIT_CALLED, DISABLED)
    report = check_script(script)
    exits = [f for f in report.findings if f.id == "exits-disabled"]
    assert [(f.severity, f.line) for f in exits] == [("warning", call_line(script))], render_text(report)
    assert "PerforatedAI's own sys.exit" in exits[0].message


def test_a_disabled_sys_exit_the_script_calls_is_an_error(tmp_path):
    script = variant(tmp_path, (END, IN_PROCESS), DISABLED)
    assert {f for f in found(script) if f[0] == "exits-disabled"} == {("exits-disabled", "error", call_line(script))}, \
        render_text(check_script(script))


def call_line(script: Path) -> int:
    return script.read_text().splitlines().index("quiet()") + 1
