"""A real perforatedai DDP script that hands add_validation_score the DDP wrapper instead of its .module: PerforatedAI
prints "Need to call .module when using add validation score" to stdout and stops in pdb, which quits on the closed
stdin (bdb.BdbQuit), after a whole epoch of training. For tests/real/test_failure_causes_real.py."""

from perforatedai import globals_perforatedai as GPA

from pai_launch import training as pt
from tests.real.tiny_training import epoch, protocol_args, tiny_data, tiny_model, tracked_optimizer

args = protocol_args()
run = pt.start(args.perforate_model_parallel)
model = tiny_model(run, testing_dendrite_capacity=False, max_dendrites=3, switch_mode=GPA.pc.DOING_SWITCH_EVERY_TIME)
model = pt.load_newest(run, model, args.pai_load_folder)
optimizer = tracked_optimizer(run, model)
ddp = pt.wrap_ddp(run, model)
x, y = tiny_data()
for number in range(3):
    epoch(run, ddp, model, optimizer, x, y)
    print(f"epoch {number} trained", flush=True)
    GPA.pai_tracker.add_validation_score(0.5, ddp)  # the mistake: the wrapper, not ddp.module
