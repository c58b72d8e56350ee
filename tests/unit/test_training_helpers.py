"""pai_launch.training, the helpers training scripts import: switch files, the marker, import weight, and the
rank-aware calls in a real 2-process gloo group (with a stand-in perforatedai)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from pai_launch import training as pt
from tests.helpers import REPO, agent_store, safetensors_bytes

HERE = Path(__file__).parent
SUPERVISOR = REPO / "supervisor"
SOLO = pt.Run(distributed=False, rank=0, world=1, local_rank=0, device="cpu", init_run=False)


def _write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


@pytest.mark.timeout(10)
def test_newest_switch_is_the_highest_whole_one(tmp_path):
    _write(tmp_path, "switch_2.pt", safetensors_bytes(b"ab"))
    _write(tmp_path, "switch_10.pt", safetensors_bytes(b"abcd", {"__metadata__": {"k": "v"}}))
    _write(tmp_path, "switch_4.pt", safetensors_bytes(b"abc"))
    assert pt.newest_switch(tmp_path) == "switch_10"  # by number, not by name
    assert pt.newest_switch(str(tmp_path)) == "switch_10"


@pytest.mark.timeout(10)
@pytest.mark.parametrize("torn", [
    lambda whole: whole[: len(whole) // 2],             # cut mid-header
    lambda whole: whole[:-1],                           # data one byte short
    lambda whole: whole + b"x",                         # data longer than the tensors cover
    lambda whole: b"",                                  # empty
    lambda whole: (10**9).to_bytes(8, "little") + whole[8:],  # header length past the end
    lambda whole: len(b"not json").to_bytes(8, "little") + b"not json",
], ids=["half", "short", "long", "empty", "header-length", "bad-json"])
def test_a_torn_newest_switch_is_skipped_for_the_one_before(tmp_path, torn):
    _write(tmp_path, "switch_2.pt", safetensors_bytes(b"ab"))
    _write(tmp_path, "switch_4.pt", torn(safetensors_bytes(b"abcdef")))
    assert pt.newest_switch(tmp_path) == "switch_2"


@pytest.mark.timeout(10)
def test_non_numeric_and_other_names_are_not_switch_files(tmp_path):
    for name in ("switch_x.pt", "switch_.pt", "switch_9.pt.tmp", "beforeSwitch_8.pt", "best_model.pt"):
        _write(tmp_path, name, safetensors_bytes(b"ab"))
    assert pt.newest_switch(tmp_path) is None
    _write(tmp_path, "switch_3.pt", safetensors_bytes(b"ab"))
    assert pt.newest_switch(tmp_path) == "switch_3"


@pytest.mark.timeout(10)
def test_no_folder_no_switch_or_only_torn_ones_is_none(tmp_path):
    assert pt.newest_switch(None) is None
    assert pt.newest_switch(tmp_path / "missing") is None
    assert pt.newest_switch(tmp_path) is None
    _write(tmp_path, "switch_2.pt", safetensors_bytes(b"ab")[:5])
    assert pt.newest_switch(tmp_path) is None


@pytest.mark.timeout(10)
def test_mark_complete_writes_the_marker_by_rename_on_rank_0(tmp_path, monkeypatch):
    save = tmp_path / "PAI"
    replaced = []
    real_replace = os.replace

    def watching_replace(src, dst):
        # At the rename the final name is absent and the temp file, in the same folder, is whole.
        replaced.append((Path(src).parent, Path(dst).exists(), Path(src).read_text()))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", watching_replace)
    pt.mark_complete(SOLO, save, "epochs_max")
    assert replaced == [(save, False, "epochs_max\n")]
    assert (save / ".training_complete").read_text() == "epochs_max\n"
    assert sorted(p.name for p in save.iterdir()) == [".training_complete"]  # no temp file left
    pt.mark_complete(SOLO, str(save))
    assert (save / ".training_complete").read_text() == "complete\n"


@pytest.mark.timeout(10)
def test_mark_complete_on_other_ranks_writes_nothing(tmp_path):
    rank1 = pt.Run(distributed=True, rank=1, world=2, local_rank=1, device="cpu", init_run=False)
    pt.mark_complete(rank1, tmp_path / "PAI")
    assert not (tmp_path / "PAI").exists()


@pytest.mark.timeout(10)
def test_a_failed_marker_write_leaves_no_temp_file(tmp_path, monkeypatch):
    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        pt.mark_complete(SOLO, tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.timeout(60)
@pytest.mark.proc  # starts processes
def test_importing_the_helpers_pulls_in_nothing_of_the_supervisor(tmp_path):
    probe = ("import json, sys; import pai_launch.training; "
             "print(json.dumps(sorted(sys.modules)))")
    env = {**os.environ, "PYTHONPATH": str(SUPERVISOR)}
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=50, check=True)
    modules = set(json.loads(done.stdout))
    heavy = {"typer", "structlog", "watchdog", "psutil", "click", "rich", "torch", "perforatedai"}
    assert {m.split(".")[0] for m in modules} & heavy == set()
    ours = {m for m in modules if m.split(".")[0] == "pai_launch"}
    # the save format is the one part it shares with the launcher (stdlib only), with the error class its refusals
    # derive from, its own in-process re-wrap and the names of NCCL's backends; nothing else of pai_launch
    assert {"pai_launch.training", "pai_launch.savefmt.checkpoint"} <= ours
    assert {m for m in ours if not m.startswith("pai_launch.savefmt")} == {
        "pai_launch", "pai_launch.training", "pai_launch.in_process", "pai_launch.backends", "pai_launch.wire",
        "pai_launch.wire.errors"}


class _Recorder:
    """A stand-in for GPA.pc / UPA that records every call."""

    def __init__(self, names):
        self.calls = []
        for name in names:
            setattr(self, name, lambda *args, _name=name: self.calls.append((_name, *args)))


def _fake_perforatedai(monkeypatch, pc=None, load_system=None):
    package = types.ModuleType("perforatedai")
    package.globals_perforatedai = types.SimpleNamespace(pc=pc)
    package.utils_perforatedai = types.SimpleNamespace(load_system=load_system)
    monkeypatch.setitem(sys.modules, "perforatedai", package)


@pytest.mark.timeout(10)
def test_configure_without_prompts_confirms_everything_then_applies_settings(monkeypatch):
    pc = _Recorder(["set_configuration_confirmed", "set_unwrapped_modules_confirmed", "set_weight_decay_accepted",
                    "set_silent", "set_max_dendrites"])
    _fake_perforatedai(monkeypatch, pc=pc)
    pt.configure_without_prompts(max_dendrites=3, silent=False)
    assert pc.calls == [("set_configuration_confirmed", True), ("set_unwrapped_modules_confirmed", True),
                        ("set_weight_decay_accepted", True), ("set_silent", True), ("set_max_dendrites", 3),
                        ("set_silent", False)]
    with pytest.raises(TypeError, match="no_such_thing"):
        pt.configure_without_prompts(no_such_thing=1)


class _Model:
    def __init__(self, name):
        self.name = name

    def to(self, device):
        return _Model(f"{self.name}@{device}")


@pytest.mark.timeout(10)
def test_load_newest_loads_the_newest_whole_switch_or_leaves_the_model(tmp_path, monkeypatch, capsys):
    loads = []

    def load_system(model, folder, name, load_from_restart):
        loads.append((folder, name, load_from_restart))
        return _Model(f"{model.name}+{name}")

    _fake_perforatedai(monkeypatch, load_system=load_system)
    model = _Model("m")
    assert pt.load_newest(SOLO, model, None) is model
    assert pt.load_newest(SOLO, model, tmp_path) is model
    assert "starting from the beginning" in capsys.readouterr().out
    _write(tmp_path, "switch_2.pt", safetensors_bytes(b"ab"))
    _write(tmp_path, "switch_4.pt", safetensors_bytes(b"abcd")[:-2])
    assert pt.load_newest(SOLO, model, tmp_path).name == "m+switch_2@cpu"
    assert loads == [(str(tmp_path), "switch_2", True)]
    out = capsys.readouterr().out
    assert "switch_4.pt" in out and f"{tmp_path}/switch_2.pt" in out


@pytest.fixture(scope="module")
def gloo_pair(tmp_path_factory):
    """tests/unit/training_helpers_worker.py run as both ranks of a gloo group: (exit codes, log lines, results).
    The group's store is the test's, as the agent hosts it (tests.helpers.agent_store)."""
    out = tmp_path_factory.mktemp("gloo-pair")
    with agent_store() as store_env:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(SUPERVISOR)]), "TRAINING_TEST_OUT": str(out),
               "WORLD_SIZE": "2", **store_env, "OMP_NUM_THREADS": "1"}
        procs = [subprocess.Popen([sys.executable, str(HERE / "training_helpers_worker.py")], cwd=out,
                                  env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
                 for rank in (0, 1)]
        try:
            outputs = [proc.communicate(timeout=80)[0] for proc in procs]
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    codes = [proc.returncode for proc in procs]
    assert codes == [0, 0], "\n".join(outputs)
    results = [json.loads((out / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    return (out / "log").read_text().splitlines(), results


@pytest.mark.torch
@pytest.mark.proc  # the module's gloo pair starts two processes
@pytest.mark.timeout(100)
def test_in_turn_runs_rank_0_then_rank_1_and_returns_each_ranks_result(gloo_pair):
    log, results = gloo_pair
    assert log[:4] == ["begin 0", "end 0", "begin 1", "end 1"]
    assert [r["in_turn"]["rank"] for r in results] == [0, 1]
    assert results[0]["in_turn"]["seen_before"] == ["begin 0"]
    assert results[1]["in_turn"]["seen_before"] == ["begin 0", "end 0", "begin 1"]


@pytest.mark.torch
@pytest.mark.proc  # the module's gloo pair starts two processes
@pytest.mark.timeout(100)
def test_add_validation_score_gives_every_rank_rank_0s_score_in_turn_on_the_unwrapped_model(gloo_pair):
    log, results = gloo_pair
    assert log[4:] == ["score rank=0 score=10.0 net=Linear", "score rank=1 score=10.0 net=Linear"]
    assert [r["wrapped"] for r in results] == ["DistributedDataParallel"] * 2
    assert [r["returned"] for r in results] == ["Linear"] * 2
    assert [(r["restructured"], r["complete"]) for r in results] == [(True, False), (False, False)]


def test_the_helpers_and_the_launcher_give_one_verdict_on_every_kind_of_switch_file(tmp_path):
    """newest_switch skips exactly the files the launcher's checkpoint check refuses (one check, not two that drift):
    an empty zip, a safetensors header whose offsets are booleans, text and zeros are refused; a whole safetensors
    file, a torch.save zip with entries and a legacy pickle are taken."""
    import json as _json
    import struct as _struct
    import zipfile as _zipfile

    from pai_launch.savefmt import checkpoint

    def safetensors(offsets) -> bytes:
        header = _json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": offsets}}).encode()
        return _struct.pack("<Q", len(header)) + header + b"\0" * 4

    def zipped(entries: bool) -> bytes:
        path = tmp_path / "z.zip"
        with _zipfile.ZipFile(path, "w") as archive:
            if entries:
                archive.writestr("archive/data.pkl", b"x")
        return path.read_bytes()

    kinds = {"whole safetensors": (safetensors([0, 4]), True), "bool offsets": (safetensors([False, True]), False),
             "zip with entries": (zipped(True), True), "empty zip": (zipped(False), False),
             "legacy pickle": (b"\x80\x02" + b"\0" * 16, True), "text": (b"not a checkpoint at all\n", False),
             "zeros": (b"\0" * 64, False)}
    for kind, (data, whole) in kinds.items():
        folder = tmp_path / kind.replace(" ", "_")
        folder.mkdir()
        (folder / "switch_2.pt").write_bytes(data)
        assert (checkpoint.problem(folder / "switch_2.pt") is None) is whole, kind
        assert pt.newest_switch(folder) == ("switch_2" if whole else None), kind
