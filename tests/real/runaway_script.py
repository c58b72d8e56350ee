"""A real perforatedai script that runs away, for tests/real/test_runaway.py: it leaves PerforatedAI's dendrite
capacity test on (the default) when perforate_model runs, which sets max_dendrites to 1000 and a switch every epoch,
then turns the test off, so the library never stops after its three test dendrites. Every generation adds a dendrite
and restarts; nothing ever writes the completion marker."""

from perforatedai import globals_perforatedai as GPA

from pai_launch import training as pt
from tests.real.tiny_training import epoch, protocol_args, tiny_data, tiny_model, tracked_optimizer

args = protocol_args()
run = pt.start(args.perforate_model_parallel)
# The capacity test left on (the default) while perforate_model runs.
model = tiny_model(run, dont_give_up_unless_learning_rate_lowered=False, find_best_lr=False)
GPA.pc.set_testing_dendrite_capacity(False)  # too late: perforate_model already took the test's settings
model = pt.load_newest(run, model, args.pai_load_folder)
optimizer = tracked_optimizer(run, model)
ddp = pt.wrap_ddp(run, model)
x, y = tiny_data()
for _ in range(10):
    model, restructured, complete = pt.add_validation_score(run, epoch(run, ddp, model, optimizer, x, y), ddp)
    if complete:
        pt.mark_complete(run, "PAI")
    if restructured or complete:
        pt.end_generation(run)
raise SystemExit("no dendrite was added in 10 epochs")
