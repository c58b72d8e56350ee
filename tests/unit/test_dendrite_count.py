"""One count of dendrites for the log, `pai-launch status`, the metrics and systemd's STATUS=: a switch file that
PerforatedAI wrote after rejecting dendrites is logged and shown as rejected, not as dendrites added."""

from pai_launch.core.reports import dendrite_verdict
from pai_launch.savefmt.pai_files import dendrites, folder_facts, kept_sizes
from pai_launch.status.events import history
from pai_launch.status.gather import gather
from pai_launch.status.model import COMPLETE, REJECTED, RESTRUCTURED
from pai_launch.supervise.outputs.metrics import RunMetrics

PARAMS = "Switch Number,Param Count\n"


def _params(*counts):
    return PARAMS + "".join(f"{i},{c}\n" for i, c in enumerate(counts))


def test_a_shrink_in_param_counts_takes_back_the_rejected_addition():
    assert dendrites(_params(612, 1260, 1260, 2016), None, []).count == 2
    assert dendrites(_params(612, 1260, 612), None, []).count == 0
    rejected_second = dendrites(_params(612, 1260, 2016, 1260), None, [])
    assert rejected_second.count == 1 and rejected_second.param_counts == [612, 1260]
    assert kept_sizes([612, 612, 612]) == [612]


def test_the_verdict_compares_the_count_before_and_after_the_generation():
    name, fields = dendrite_verdict(2, 1, 2, ("switch_4.pt",))
    assert name == "dendrites_added" and (fields["dendrites"], fields["added"]) == (2, 1)
    name, fields = dendrite_verdict(3, 2, 2, ("switch_4.pt",))
    assert name == "dendrites_rejected" and fields["dendrites"] == 2 and "taken_back" not in fields
    assert "did not improve" in fields["hint"]
    name, fields = dendrite_verdict(3, 2, 1, ("switch_4.pt",))
    assert name == "dendrites_rejected" and (fields["dendrites"], fields["taken_back"]) == (1, 1)


def _ev(name, **fields):
    return {"event": name, "time": "2026-12-01T16:43:08Z", **fields}


def test_status_shows_a_generation_whose_dendrites_were_rejected_as_such():
    story = history([
        _ev("run_started", pid=1),
        _ev("generation_started", generation=1), _ev("switch_written", generation=1, switch=2, file="switch_2.pt"),
        _ev("dendrites_added", generation=1, dendrites=1, added=1, switch_files=["switch_2.pt"]),
        _ev("generation_ended", generation=1, duration_s=2.0, complete=False, switch_files=["switch_2.pt"]),
        _ev("generation_started", generation=2), _ev("switch_written", generation=2, switch=2, file="switch_2.pt"),
        _ev("dendrites_rejected", generation=2, dendrites=1, switch_files=["switch_2.pt"]),
        _ev("generation_ended", generation=2, duration_s=2.0, complete=False, switch_files=["switch_2.pt"]),
        _ev("generation_started", generation=3),
        _ev("generation_ended", generation=3, duration_s=2.0, complete=True, switch_files=[])])
    assert [(g.outcome, g.dendrites) for g in story.generations] == [(RESTRUCTURED, 1), (REJECTED, 1), (COMPLETE, None)]
    assert story.generations[1].switch_files == ["switch_2.pt"]


def test_an_older_logs_dendrites_added_per_file_still_names_its_switch_file():
    story = history([_ev("run_started", pid=1), _ev("generation_started", generation=1),
                     _ev("dendrites_added", generation=1, switch=2, file="switch_2.pt"),
                     _ev("generation_ended", generation=1, duration_s=2.0, complete=False)])
    assert story.generations[0].switch_files == ["switch_2.pt"] and story.generations[0].outcome == RESTRUCTURED


def test_status_the_metrics_and_the_live_count_read_the_folder_alike(tmp_path):
    save = tmp_path / "PAI"
    (save / ".pai-launch").mkdir(parents=True)
    (save / "array_dims.csv").write_text(".fc1,1,32\n")
    (save / "switch_2.pt").write_bytes(b"x")
    (save / "switch_4.pt").write_bytes(b"x")
    (save / "PAIparam_counts.csv").write_text(_params(612, 1260, 612))  # the one addition was rejected
    metrics = RunMetrics(lambda: save)
    metrics.observe({"event": "run_started", "generation": 0})
    counts = {gather(save).dendrites.count, folder_facts(save)[0],
              metrics.registry.get_sample_value("pai_launch_dendrites")}
    assert counts == {0}


def test_the_dendrite_limit_comes_from_the_config_or_from_perforatedais_capacity_test():
    from pai_launch.savefmt.pai_files import CAPACITY_TEST_DENDRITES, dendrite_limit

    assert dendrite_limit(["PAI_config.json"], '{"max_dendrites": 5}') == (5, "max_dendrites in <save>_config.json")
    # PerforatedAI trained (best_model.pt) but wrote no config: its capacity test was on when perforate_model ran.
    most, source = dendrite_limit(["array_dims.csv", "best_model.pt", "switch_2.pt"], None)
    assert most == CAPACITY_TEST_DENDRITES == 3 and "capacity test" in source
    assert dendrite_limit(["array_dims.csv", "switch_2.pt"], None) == (None, ""), "nothing of PerforatedAI's says"
    assert dendrite_limit(["PAI_config.json", "best_model.pt"], '{"maximizing_score": true}') == (None, "")
