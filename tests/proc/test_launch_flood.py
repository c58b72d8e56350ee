"""Ranks that print faster than anything can relay: the run still ends as it should, each rank's last line reaches
pai-launch's stdout, and the agent's memory does not grow with the backlog."""

from __future__ import annotations

import threading

import psutil
import pytest

from tests.proc.launch_files import wait_event

pytestmark = pytest.mark.timeout(120)

FLOOD_MB = 40
#: What the agent may grow by while it relays 2 x FLOOD_MB: far below the backlog it would hold if it read it whole.
GROWTH_BOUND_MB = 150


class PeakRss:
    """The highest RSS a process reaches, sampled until stopped (a memory bound, not a clock)."""

    def __init__(self, proc: psutil.Process) -> None:
        self.proc, self.first = proc, proc.memory_info().rss
        self.peak = self.first
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            try:
                self.peak = max(self.peak, self.proc.memory_info().rss)
            except psutil.Error:
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def test_ranks_that_flood_their_output_end_with_0_their_last_lines_relayed_and_the_agent_bounded(scene, both_modes):
    launch = scene.start("--nproc", "2", "--grace", "2", script_args=["--generations", "1", "--flood-mb",
                                                                      str(FLOOD_MB)])
    rss = PeakRss(psutil.Process(wait_event(launch, "agent_ready", 60)["agent_pid"]))
    try:
        rc = launch.wait(100)
    finally:
        rss.stop()

    assert rc == 0, launch.log_summary()
    assert launch.event("generation_ended")["exit"] == "all workers exited 0"
    assert not launch.events("generation_failed") and not launch.events("agent_replaced")
    out = launch.stdout_path.read_bytes()
    for rank in (0, 1):
        assert out.count(b"[rank%d]: rank %d flood done\n" % (rank, rank)) == 1, rank
        flooded = out.count(b"[rank%d]: rank %d flooding " % (rank, rank))
        notes = out.count(b"[rank%d]: pai-launch: skipped " % rank)
        assert flooded > 0 and (notes > 0 or flooded >= FLOOD_MB * 1e6 // 100), (rank, flooded, notes)
    growth_mb = (rss.peak - rss.first) / 2**20
    assert growth_mb < GROWTH_BOUND_MB, f"the agent grew by {growth_mb:.0f} MB (from {rss.first / 2**20:.0f} MB)"
