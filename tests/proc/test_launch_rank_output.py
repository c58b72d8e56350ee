"""torchrun's --local-ranks-filter, --redirects and --tee with the real pai-launch: the console shows the ranks and
streams asked for, and --log-dir's files keep every rank's output."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(120)


def _kept(logs) -> str:
    return "".join(path.read_text() for path in sorted(logs.rglob("stdout.log")))


@pytest.mark.parametrize("options, shown, hidden", [
    (["--local_ranks_filter", "1"], 1, 0),
    (["-r", "1", "--tee", "0:1"], 0, 1),
])
def test_the_console_shows_the_ranks_asked_for_and_the_files_keep_every_ranks(scene, tmp_path, options, shown, hidden):
    logs = tmp_path / "logs"
    launch, rc = scene.run("--nproc", "2", "--log_dir", str(logs), *options, script_args=["--generations", "2"])
    assert rc == 0, launch.log_summary()
    assert f"[rank{shown}]: rank {shown} generation 1" in launch.stdout
    assert f"[rank{shown}]: rank {shown} generation 2" in launch.stdout
    assert f"[rank{hidden}]" not in launch.stdout
    kept = _kept(logs)
    for rank in (0, 1):
        for generation in (1, 2):
            assert f"rank {rank} generation {generation}" in kept
