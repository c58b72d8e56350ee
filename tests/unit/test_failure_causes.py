"""The line that explains a rank's death, and the known PerforatedAI/DDP causes, from realistic log tails."""

from pai_launch.wire import failure_causes
from pai_launch.wire.failure_causes import compact, explaining_line, known_cause

GLOO_BUFFERS = """\
Traceback (most recent call last):
  File "/home/u/train.py", line 141, in <module>
    main()
  File "/home/u/train.py", line 118, in main
    output = model(data)
             ^^^^^^^^^^^
  File "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1736, in _wrapped_call_impl
    return self._call_impl(*args, **kwargs)
  File "/venv/lib/python3.11/site-packages/torch/nn/parallel/distributed.py", line 1636, in forward
    inputs, kwargs = self._pre_forward(*inputs, **kwargs)
  File "/venv/lib/python3.11/site-packages/torch/nn/parallel/distributed.py", line 1534, in _pre_forward
    self._sync_buffers()
  File "/venv/lib/python3.11/site-packages/torch/nn/parallel/distributed.py", line 2173, in _sync_buffers
    self._sync_module_buffers(authoritative_rank)
  File "/venv/lib/python3.11/site-packages/torch/nn/parallel/distributed.py", line 2177, in _sync_module_buffers
    self._default_broadcast_coalesced(authoritative_rank=authoritative_rank)
  File "/venv/lib/python3.11/site-packages/torch/nn/parallel/distributed.py", line 2199, in _default_broadcast_coalesced
    self._distributed_broadcast_coalesced(bufs, bucket_size, authoritative_rank)
  File "/venv/lib/python3.11/site-packages/torch/nn/parallel/distributed.py", line 2114, in _distributed_broadcast_coalesced
    dist._broadcast_coalesced(
RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:525] Received data size doesn't match expected size. Expected: 4096, received: 4224
"""  # noqa: E501

FAULTHANDLER_ABORT = """\
terminate called after throwing an instance of 'gloo::EnforceNotMet'
  what():  [enforce fail at ../third_party/gloo/gloo/transport/tcp/pair.cc:446] op.preamble.length <= op.nbytes. 8832 vs 8192
Fatal Python error: Aborted

Thread 0x00007f3a2effd640 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 331 in wait
  File "/usr/lib/python3.11/threading.py", line 629 in wait
  File "/venv/lib/python3.11/site-packages/tqdm/_monitor.py", line 60 in run
  File "/usr/lib/python3.11/threading.py", line 1045 in _bootstrap_inner
  File "/usr/lib/python3.11/threading.py", line 1002 in _bootstrap

Current thread 0x00007f3b8c1f4740 (most recent call first):
  File "/venv/lib/python3.11/site-packages/torch/nn/parallel/distributed.py", line 2114 in _distributed_broadcast_coalesced
  File "/venv/lib/python3.11/site-packages/torch/nn/parallel/distributed.py", line 2199 in _default_broadcast_coalesced
  File "/venv/lib/python3.11/site-packages/torch/nn/parallel/distributed.py", line 2177 in _sync_module_buffers
  File "/venv/lib/python3.11/site-packages/torch/nn/parallel/distributed.py", line 2173 in _sync_buffers
  File "/venv/lib/python3.11/site-packages/torch/nn/parallel/distributed.py", line 1534 in _pre_forward
  File "/home/u/train.py", line 118 in main
  File "/home/u/train.py", line 141 in <module>

Extension modules: numpy.core._multiarray_umath, numpy.core._multiarray_tests, numpy.linalg._umath_linalg, torch._C, torch._C._fft, torch._C._linalg (total: 22)
"""  # noqa: E501

SEGFAULT = """\
Fatal Python error: Segmentation fault

Current thread 0x00007f3b8c1f4740 (most recent call first):
  File "/venv/lib/python3.11/site-packages/torch/cuda/__init__.py", line 319 in _lazy_init
  File "/home/u/train.py", line 20 in <module>

Extension modules: numpy.core._multiarray_umath, torch._C (total: 12)
"""

PERFORATE_RACE = """\
Traceback (most recent call last):
  File "/home/u/train.py", line 64, in <module>
    model = UPA.perforate_model(model, doing_pai=True, save_name=args.save, making_graphs=False)
            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/venv/lib/python3.11/site-packages/perforatedai/utils_perforatedai.py", line 452, in perforate_model
    GPA.pai_tracker.load_config(save_name)
  File "/venv/lib/python3.11/site-packages/perforatedai/tracker_perforatedai.py", line 311, in load_config
    settings = json.load(f)
               ^^^^^^^^^^^^
  File "/usr/lib/python3.11/json/__init__.py", line 293, in load
    return loads(fp.read(),
  File "/usr/lib/python3.11/json/decoder.py", line 355, in raw_decode
    raise JSONDecodeError("Expecting value", s, err.value) from None
json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)
"""

VALIDATION_RACE = """\
Traceback (most recent call last):
  File "/home/u/train.py", line 131, in <module>
    model, restructured, complete = GPA.pai_tracker.add_validation_score(score, model)
  File "/venv/lib/python3.11/site-packages/perforatedai/tracker_perforatedai.py", line 1630, in add_validation_score
    net = UPA.load_system(net, GPA.pc.get_save_name(), "best_model", switch_call=True)
  File "/venv/lib/python3.11/site-packages/perforatedai/utils_perforatedai.py", line 781, in load_system
    net = load_net(net, folder, name)
  File "/venv/lib/python3.11/site-packages/perforatedai/utils_perforatedai.py", line 742, in load_net
    state_dict = torch.load(folder + "/" + name + ".pt", map_location="cpu")["model"]
KeyError: 'model'
"""

RANK_UNSET = """\
Traceback (most recent call last):
  File "/home/u/train.py", line 12, in <module>
    dist.init_process_group("gloo")
  File "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 83, in wrapper
    return func(*args, **kwargs)
  File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 1704, in init_process_group
    store, rank, world_size = next(rendezvous_iterator)
  File "/venv/lib/python3.11/site-packages/torch/distributed/rendezvous.py", line 246, in _env_rendezvous_handler
    rank = int(_get_env_or_raise("RANK"))
  File "/venv/lib/python3.11/site-packages/torch/distributed/rendezvous.py", line 231, in _get_env_or_raise
    raise _env_error(env_var)
ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable RANK expected, but not set
"""  # noqa: E501

CHAINED = """\
Traceback (most recent call last):
  File "/home/u/train.py", line 5, in load
    return torch.load(path)
FileNotFoundError: [Errno 2] No such file or directory: 'PAI/latest.pt'

During handling of the above exception, another exception was handled:

Traceback (most recent call last):
  File "/home/u/train.py", line 9, in <module>
    load()
RuntimeError: no checkpoint to resume from
[W1201 23:40:01.123 ProcessGroupGloo.cpp:712] Warning: destroying a process group with pending work
"""


def test_a_python_traceback_is_explained_by_its_exception_line():
    assert explaining_line(GLOO_BUFFERS).startswith("RuntimeError: "
                                                    "[../third_party/gloo/gloo/transport/tcp/pair.cc:525] "
                                                    "Received data size doesn't match")
    assert explaining_line(PERFORATE_RACE) == "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)"
    assert explaining_line(VALIDATION_RACE) == "KeyError: 'model'"


def test_the_last_traceback_wins_over_a_chained_one_and_later_warnings():
    assert explaining_line(CHAINED) == "RuntimeError: no checkpoint to resume from"


def test_faulthandler_and_terminate_noise_is_skipped_to_the_what_line():
    assert explaining_line(FAULTHANDLER_ABORT) == ("what():  [enforce fail at ../third_party/gloo/gloo/transport/tcp/"
                                                   "pair.cc:446] op.preamble.length <= op.nbytes. 8832 vs 8192")


def test_a_dump_with_nothing_else_is_explained_by_its_fatal_error():
    assert explaining_line(SEGFAULT) == "Fatal Python error: Segmentation fault"


def test_plain_output_is_explained_by_its_last_line():
    assert explaining_line("starting\nrank 1 failing on purpose with 7\n\n") == "rank 1 failing on purpose with 7"
    assert explaining_line("") == ""


def test_torch_rank_prefixes_do_not_hide_the_exception():
    prefixed = "\n".join(f"[rank1]:{line}" for line in RANK_UNSET.splitlines())
    assert explaining_line(prefixed).startswith("ValueError: Error initializing torch.distributed")


def test_the_known_causes_are_named_with_the_doctor_check():
    assert known_cause(GLOO_BUFFERS).id == "ddp-broadcast-buffers"
    assert known_cause(FAULTHANDLER_ABORT).id == "ddp-broadcast-buffers"
    assert known_cause(PERFORATE_RACE).id == "perforate-model-race"
    assert known_cause(VALIDATION_RACE).id == "validation-score-race"
    assert known_cause(RANK_UNSET).id == "init-process-group-unguarded"
    assert "broadcast_buffers=False" in known_cause(GLOO_BUFFERS).fix
    assert "find_unused_parameters=True" in known_cause(GLOO_BUFFERS).fix
    nccl = GLOO_BUFFERS.replace("Received data size doesn't match expected size", "NCCL size mismatch")
    assert known_cause(nccl).id == "ddp-broadcast-buffers"


def test_argparse_rejecting_pai_launchs_flags_is_named_with_the_flag_check():
    usage = "usage: train.py [-h] [--epochs EPOCHS]\ntrain.py: error: unrecognized arguments: "
    assert known_cause(usage + "--perforate_model_parallel").id == "flag-perforate-model-parallel"
    assert known_cause(usage + "--lr 3 --pai_load_folder /runs/PAI").id == "flag-pai-load-folder"
    assert "--pai-load-folder" in known_cause(usage + "--pai_load_folder PAI").name
    assert known_cause(usage + "--lr 3") is None


def test_lookalikes_are_not_named():
    assert known_cause(SEGFAULT) is None
    assert known_cause(CHAINED) is None
    assert known_cause("Traceback ...\nKeyError: 'best_mean_score_imp'") is None
    assert known_cause("json.decoder.JSONDecodeError: Expecting value") is None  # not in perforate_model
    mine = "  File \"train.py\", line 3, in step\n    dist.all_reduce(t)\nRuntimeError: size mismatch in my all_reduce"
    assert known_cause(mine) is None


def test_fields_carry_the_line_and_a_known_cause():
    assert failure_causes.fields(RANK_UNSET) == {
        "log_line": "ValueError: Error initializing torch.distributed using env:// rendezvous: "
                    "environment variable RANK expected, but not set",
        "cause": known_cause(RANK_UNSET).name, "fix": known_cause(RANK_UNSET).fix,
        "doctor_id": "init-process-group-unguarded"}
    assert failure_causes.fields("rank 1 failing on purpose with 7") == {"log_line": "rank 1 failing on purpose with 7"}
    assert failure_causes.fields("\n") == {}
    assert "(pai-launch doctor check perforate-model-race; fix: " in failure_causes.summary(PERFORATE_RACE)
    assert failure_causes.summary(SEGFAULT) == ""


def test_compact_drops_other_threads_and_module_lists_but_keeps_the_crashing_frames():
    kept = compact(FAULTHANDLER_ABORT.splitlines())
    assert not any("threading.py" in line or "Extension modules" in line for line in kept)
    assert any("_sync_buffers" in line for line in kept) and any("what():" in line for line in kept)
    cxx = ["terminate called after throwing an instance of 'c10::Error'", "  what():  boom",
           "Exception raised from run at ../c10.cpp:1 (most recent call first):"]
    cxx += [f"frame #{i}: 0x7f{i} in libc10.so" for i in range(30)]
    assert compact(cxx) == cxx[:3]
    assert compact(GLOO_BUFFERS.splitlines()) == GLOO_BUFFERS.splitlines()
