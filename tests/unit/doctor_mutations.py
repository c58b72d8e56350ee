"""Broken variants of tests/doctor_scripts/good/minimal_ddp.py, each changing one thing in it: name -> (old, new)
text. `write_broken` writes a variant where a test wants it (read by doctor, never run)."""

from __future__ import annotations

from pathlib import Path

BASE = Path(__file__).resolve().parent.parent / "doctor_scripts" / "good" / "minimal_ddp.py"

MUTATIONS: dict[str, tuple[str, str]] = {
    # perforatedai 1.x's initialize_pai, which 3.x does not have
    'initialize_pai': (
        'model = in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), save_name=args.save))\n',
        'model = in_turn(lambda: UPA.initialize_pai(nn.Linear(8, 2), save_name=args.save))\n',
    ),
    # PerforatedAI's single-process demo mode
    'demo_mode': (
        'model = in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), save_name=args.save))\n',
        'model = in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), save_name=args.save, demo_mode=True,\n'
        '                                            demo_phase_steps=20))\n',
    ),
    # dendrites added by hand, single-process only
    'initialize_dendrites': (
        'GPA.pai_tracker.set_optimizer(torch.optim.SGD)\n',
        'UPA.initialize_dendrites(model, torch.randn(1, 8))\nGPA.pai_tracker.set_optimizer(torch.optim.SGD)\n',
    ),
    # a perforatedai 1.x module beside the 3.x ones
    'legacy_api': (
        'from perforatedai import utils_perforatedai as UPA\n',
        'from perforatedai import utils_perforatedai as UPA\nfrom perforatedai import pb_globals as PBG\n',
    ),
    # DDP broadcasts buffers
    'ddp_broadcast_buffers': (
        '        model = nn.parallel.DistributedDataParallel(model, find_unused_parameters=True, '
        'broadcast_buffers=False)\n',
        '        model = nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)\n',
    ),
    # DDP without find_unused_parameters
    'ddp_find_unused': (
        '        model = nn.parallel.DistributedDataParallel(model, find_unused_parameters=True, '
        'broadcast_buffers=False)\n',
        '        model = nn.parallel.DistributedDataParallel(model, broadcast_buffers=False)\n',
    ),
    # leaves a generation without barrier and destroy_process_group
    'generation_end': (
        '        if distributed:\n            dist.barrier()\n            dist.destroy_process_group()\n',
        '',
    ),
    # a barrier in the init run
    'init_barrier': (
        '            sys.exit(0)\n',
        '            dist.barrier()\n            sys.exit(0)\n',
    ),
    # the init run does not exit
    'init_no_exit': (
        '            sys.exit(0)\n',
        '',
    ),
    # the init run saves no tracker settings
    'init_no_save': (
        '            GPA.pai_tracker.save_tracker_settings()\n',
        '',
    ),
    # loads the checkpoint after building the optimizer
    'load_after_optimizer': (
        'if args.pai_load_folder:\n    newest = max(glob.glob(os.path.join(args.pai_load_folder, "switch_*.pt")), '
        'key=os.path.getmtime)\n    model = UPA.load_system(model, args.pai_load_folder, '
        'os.path.basename(newest)[:-3], True)\nGPA.pai_tracker.set_optimizer(torch.optim.SGD)\n'
        'optimizer, scheduler = GPA.pai_tracker.setup_optimizer(model, {"params": model.parameters(), "lr": 0.1}, '
        '{})\n',
        'GPA.pai_tracker.set_optimizer(torch.optim.SGD)\noptimizer, scheduler = GPA.pai_tracker.setup_optimizer(model, '
        '{"params": model.parameters(), "lr": 0.1}, {})\nif args.pai_load_folder:\n'
        '    newest = max(glob.glob(os.path.join(args.pai_load_folder, "switch_*.pt")), key=os.path.getmtime)\n'
        '    model = UPA.load_system(model, args.pai_load_folder, os.path.basename(newest)[:-3], True)\n',
    ),
    # every rank writes the marker
    'marker_every_rank': (
        '        if rank == 0:\n            with open(os.path.join(args.save, ".training_complete"), "w") as marker:\n'
        '                marker.write("complete\\n")\n',
        '        with open(os.path.join(args.save, ".training_complete"), "w") as marker:\n'
        '            marker.write("complete\\n")\n',
    ),
    # never writes the marker
    'marker_missing': (
        '    if complete:\n        if rank == 0:\n            with open(os.path.join(args.save, ".training_complete"), '
        '"w") as marker:\n                marker.write("complete\\n")\n',
        '',
    ),
    # does not accept the two flags
    'no_flags': (
        'parser.add_argument("--perforate_model_parallel", action="store_true")\n'
        'parser.add_argument("--pai_load_folder", default=None)\n',
        '',
    ),
    # never loads a switch checkpoint
    'no_resume': (
        'import glob\nimport os\nimport sys\n\nimport torch\nimport torch.distributed as dist\nimport torch.nn as nn\n'
        'from perforatedai import globals_perforatedai as GPA\nfrom perforatedai import utils_perforatedai as UPA\n\n'
        'parser = argparse.ArgumentParser()\nparser.add_argument("--perforate_model_parallel", action="store_true")\n'
        'parser.add_argument("--pai_load_folder", default=None)\nparser.add_argument("--save", default="PAI")\n'
        'args = parser.parse_args()\ninit_run = args.perforate_model_parallel\ndistributed = not init_run and '
        '"WORLD_SIZE" in os.environ\nif distributed:\n    dist.init_process_group("gloo")\n'
        'rank = dist.get_rank() if distributed else 0\nworld = dist.get_world_size() if distributed else 1\n\n\n'
        'def in_turn(fn):\n    if not distributed:\n        return fn()\n    result = None\n'
        '    for turn in range(world):\n        if turn == rank:\n            result = fn()\n        dist.barrier()\n'
        '    return result\n\n\nGPA.pc.set_configuration_confirmed(True)\n'
        'GPA.pc.set_unwrapped_modules_confirmed(True)\nGPA.pc.set_weight_decay_accepted(True)\n'
        'model = in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), save_name=args.save))\nif args.pai_load_folder:\n'
        '    newest = max(glob.glob(os.path.join(args.pai_load_folder, "switch_*.pt")), key=os.path.getmtime)\n'
        '    model = UPA.load_system(model, args.pai_load_folder, os.path.basename(newest)[:-3], True)\n',
        'import os\nimport sys\n\nimport torch\nimport torch.distributed as dist\nimport torch.nn as nn\n'
        'from perforatedai import globals_perforatedai as GPA\nfrom perforatedai import utils_perforatedai as UPA\n\n'
        'parser = argparse.ArgumentParser()\nparser.add_argument("--perforate_model_parallel", action="store_true")\n'
        'parser.add_argument("--pai_load_folder", default=None)\nparser.add_argument("--save", default="PAI")\n'
        'args = parser.parse_args()\ninit_run = args.perforate_model_parallel\ndistributed = not init_run and '
        '"WORLD_SIZE" in os.environ\nif distributed:\n    dist.init_process_group("gloo")\n'
        'rank = dist.get_rank() if distributed else 0\nworld = dist.get_world_size() if distributed else 1\n\n\n'
        'def in_turn(fn):\n    if not distributed:\n        return fn()\n    result = None\n'
        '    for turn in range(world):\n        if turn == rank:\n            result = fn()\n        dist.barrier()\n'
        '    return result\n\n\nGPA.pc.set_configuration_confirmed(True)\n'
        'GPA.pc.set_unwrapped_modules_confirmed(True)\nGPA.pc.set_weight_decay_accepted(True)\n'
        'model = in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), save_name=args.save))\n',
    ),
    # every rank perforates at once
    'perforate_race': (
        'model = in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), save_name=args.save))\n',
        'model = UPA.perforate_model(nn.Linear(8, 2), save_name=args.save)\n',
    ),
    # builds a plain torch optimizer
    'plain_optimizer': (
        'GPA.pai_tracker.set_optimizer(torch.optim.SGD)\noptimizer, scheduler = GPA.pai_tracker.setup_optimizer(model, '
        '{"params": model.parameters(), "lr": 0.1}, {})\n',
        'optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n',
    ),
    # turns the dendrite capacity test off after perforate_model took its settings (a runaway)
    'capacity_test_late': (
        'model = in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), save_name=args.save))\n',
        'model = in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), save_name=args.save))\n'
        'GPA.pc.set_testing_dendrite_capacity(False)\n',
    ),
    # confirms the configuration after perforate_model
    'prompts_late': (
        'GPA.pc.set_configuration_confirmed(True)\nGPA.pc.set_unwrapped_modules_confirmed(True)\n'
        'GPA.pc.set_weight_decay_accepted(True)\nmodel = in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), '
        'save_name=args.save))\n',
        'GPA.pc.set_unwrapped_modules_confirmed(True)\nGPA.pc.set_weight_decay_accepted(True)\n'
        'model = in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), save_name=args.save))\n'
        'GPA.pc.set_configuration_confirmed(True)\n',
    ),
    # asks for confirmation (no prompt-free settings)
    'prompts_missing': (
        'GPA.pc.set_configuration_confirmed(True)\nGPA.pc.set_unwrapped_modules_confirmed(True)\nGPA.pc.set_weight_decay_accepted(True)\n',
        '',
    ),
    # checks restructured before training_complete
    'restructured_first': (
        '    if complete:\n',
        '    if restructured:\n        if distributed:\n            dist.barrier()\n'
        '            dist.destroy_process_group()\n        sys.exit(0)\n    if complete:\n',
    ),
    # every rank adds the score at once
    'validation_race': (
        '    net, restructured, complete = in_turn(lambda: GPA.pai_tracker.add_validation_score(0.5, net))\n',
        '    net, restructured, complete = GPA.pai_tracker.add_validation_score(0.5, net)\n',
    ),
    # only rank 0 adds the score, nothing broadcast
    'validation_rank0_only': (
        '    net, restructured, complete = in_turn(lambda: GPA.pai_tracker.add_validation_score(0.5, net))\n',
        '    restructured = complete = False\n    if rank == 0:\n        net, restructured, complete = '
        'GPA.pai_tracker.add_validation_score(0.5, net)\n',
    ),
    # add_validation_score on the DDP wrapper
    'validation_wrapped': (
        '    net = model.module if distributed else model\n',
        '    net = model\n',
    ),
    # starts the process group in the init run too
    'init_process_group': (
        'if distributed:\n    dist.init_process_group("gloo")\n',
        'dist.init_process_group("gloo")\n',
    ),
    # throws the DDP wrapper away right after building it
    'ddp_wrapper_discarded': (
        '        model = nn.parallel.DistributedDataParallel(model, find_unused_parameters=True, '
        'broadcast_buffers=False)\n',
        '        model = nn.parallel.DistributedDataParallel(model, find_unused_parameters=True, '
        'broadcast_buffers=False)\n'
        '        model = model.module\n',
    ),
    # always resumes from latest
    'resume_latest': (
        '    newest = max(glob.glob(os.path.join(args.pai_load_folder, "switch_*.pt")), key=os.path.getmtime)\n'
        '    model = UPA.load_system(model, args.pai_load_folder, os.path.basename(newest)[:-3], True)\n',
        '    model = UPA.load_system(model, args.pai_load_folder, "latest", True)\n',
    ),
    # removes the save folder on a fresh start
    'save_removed': (
        'args = parser.parse_args()\n',
        'args = parser.parse_args()\nif not args.pai_load_folder:\n    shutil.rmtree(args.save, ignore_errors=True)\n',
    ),
    # goes on training in the same process after a restructure
    'restructure_same_process': (
        '    if complete or restructured:\n',
        '    elif restructured and not complete:\n'
        '        optimizer, scheduler = GPA.pai_tracker.setup_optimizer(net, {"params": net.parameters()}, {})\n'
        '    if complete:\n',
    ),
    # spells the load folder flag with hyphens
    'flag_hyphens': (
        'parser.add_argument("--pai_load_folder", default=None)\n',
        'parser.add_argument("--pai-load-folder", default=None)\n',
    ),
}


def write_broken(name: str, folder: Path, file_name: str | None = None) -> Path:
    """minimal_ddp.py with mutation `name` applied, as FOLDER/NAME.py (or FOLDER/FILE_NAME)."""
    text = BASE.read_text()
    old, new = MUTATIONS[name]
    assert text.count(old) == 1, f"{name}: minimal_ddp.py changed; the text this variant replaces is not there once"
    path = folder / (file_name or f"{name}.py")
    path.write_text(text.replace(old, new))
    return path
