"""Real perforatedai: minimal_ddp.py made to train (quick dendrites, a score that improves), broken in several places
of the protocol at once (no in_turn of its own, every rank perforating and scoring at once, no settings saved by the
init run, no marker, no barrier or destroy_process_group at a generation's end; or the process group started in the
init run, the score added by rank 0 alone, restructured checked first, no resume), fixed by doctor --fix's protocol
fixers, then run by pai-launch --nproc 2 from the init run to completion."""

import os

import pytest

from pai_launch.doctor.diagnose import check_script
from tests.helpers import REPO, is_live, run_pai_launch
from tests.unit.doctor_mutations import BASE, MUTATIONS
from tests.unit.test_fix_protocol import EXTRA, MARKER, RESUME, fix_all

pytestmark = pytest.mark.timeout(400)

QUICK = '''GPA.pc.set_testing_dendrite_capacity(False)
GPA.pc.set_max_dendrites(1)
GPA.pc.set_switch_mode(GPA.pc.DOING_FIXED_SWITCH)
GPA.pc.set_fixed_switch_num(2)
GPA.pc.set_first_fixed_switch_num(2)
GPA.pc.set_dont_give_up_unless_learning_rate_lowered(False)
GPA.pc.set_find_best_lr(False)
GPA.pc.set_silent(True)
'''
#: Training that learns: the same data on every rank, gradients for every parameter (DDP's allreduce needs them),
#: the loss on it as the score (lower is better), and a cap on epochs per process.
TRAINS = [
    ("GPA.pc.set_weight_decay_accepted(True)\n", "GPA.pc.set_weight_decay_accepted(True)\n" + QUICK),
    ("UPA.perforate_model(nn.Linear(8, 2), save_name=args.save)",
     ("UPA.perforate_model(nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)), save_name=args.save, "
      "maximizing_score=False, making_graphs=False)")),
    ("while True:\n    for x, y in [(torch.randn(4, 8), torch.randint(0, 2, (4,)))]:\n        optimizer.zero_grad()\n",
     ("torch.manual_seed(0)\ndata = [(torch.randn(32, 8), torch.randint(0, 2, (32,)))]\nfor epoch in range(40):\n"
      "    for x, y in data:\n        optimizer.zero_grad()\n        for p in model.parameters():\n"
      "            if p.requires_grad and p.grad is None:\n                p.grad = torch.zeros_like(p)\n")),
    ("add_validation_score(0.5, net)", "add_validation_score(score, net)"),
    ("    net = model.module if distributed else model\n",
     ("    net = model.module if distributed else model\n"
      "    with torch.no_grad():\n        score = nn.functional.cross_entropy(net(data[0][0]), data[0][1]).item()\n")),
]


#: Two scripts, each broken in several places: the edits, and the findings doctor must report before the fixes.
BROKEN = {
    "races_init_marker_end": ([*EXTRA["no_turn_helper"], MUTATIONS["init_no_save"], (MARKER, ""),
                               MUTATIONS["generation_end"]],
                              {"perforate-model-race", "validation-score-race", "init-settings-not-saved",
                               "marker-missing", "generation-end-barrier"}),
    "group_rank0_order_resume": ([MUTATIONS["init_process_group"], MUTATIONS["validation_rank0_only"],
                                  MUTATIONS["restructured_first"], (RESUME, "")],
                                 {"init-process-group-unguarded", "validation-score-rank0-only",
                                  "restructured-before-complete", "resume-missing"}),
}


def broken_script(folder, edits):
    text = BASE.read_text()
    for old, new in [*edits, *TRAINS]:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = folder / "train.py"
    path.write_text(text)
    return path


@pytest.mark.parametrize("broken", list(BROKEN))
def test_a_script_fixed_by_the_protocol_fixers_trains_to_completion(tmp_path, broken):
    edits, expected = BROKEN[broken]
    script = broken_script(tmp_path, edits)
    assert expected <= {f.id for f in check_script(script).findings}
    fixed = fix_all(script)
    assert check_script(script).findings == (), fixed

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done, seen = run_pai_launch(["--log-format", "json", "--nproc", "2", "--backoff", "0.2", str(script)],
                                cwd=tmp_path, env=env, timeout=380)
    events = done.events()
    assert done.popen.returncode == 0, done.stderr[-4000:]
    assert any(e["event"] == "init_exited" for e in events)
    assert (tmp_path / "PAI" / "array_dims.csv").is_file()
    assert (tmp_path / "PAI" / ".training_complete").is_file()
    assert list((tmp_path / "PAI").glob("switch_*.pt"))
    starts = [e["load_folder"] for e in events if e["event"] == "generation_started"]
    assert len(starts) >= 2 and starts[1:] == ["PAI"] * (len(starts) - 1), starts
    assert events[-1]["event"] == "run_finished" and events[-1]["exit_code"] == 0
    assert [p for p in seen if is_live(p)] == []
