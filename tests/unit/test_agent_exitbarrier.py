"""agent.exitbarrier: a node whose workers succeeded does not wait in torch's exit barrier for the agents of a node
whose workers failed (they never enter it); on a stand-in class, and on the installed torch in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from pai_launch.agent import exitbarrier

pytestmark = pytest.mark.timeout(60)


def test_a_skipped_barrier_returns_at_once_without_its_store():
    class Agent:
        def _exit_barrier(self):
            raise AssertionError("waited for the other agents")

    exitbarrier.skip(Agent)
    exitbarrier.skip(Agent)  # again: still returns
    assert Agent()._exit_barrier() is None


@pytest.mark.proc  # starts a process
def test_apply_leaves_the_store_alone_in_torchs_own_agent():
    """torch's barrier adds this agent to the count and waits for the rest; once applied, no store call at all."""
    probe = textwrap.dedent("""
        from types import SimpleNamespace
        from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent
        from pai_launch.agent import exitbarrier
        class Store:
            def __init__(self): self.calls, self.timeout = [], None
            def add(self, key, value): self.calls.append("add"); return 1
            def set(self, key, value): self.calls.append("set")
            def wait(self, keys, *args): self.calls.append("wait"); raise RuntimeError("the peer never arrives")
            def set_timeout(self, timeout): self.timeout = timeout
        def barrier_calls():
            agent = LocalElasticAgent.__new__(LocalElasticAgent)
            agent._store, agent._exit_barrier_timeout = Store(), 300
            agent._worker_group = SimpleNamespace(group_world_size=2, state="SUCCEEDED")
            agent._exit_barrier()
            return ",".join(agent._store.calls) or "none"
        before = barrier_calls()
        exitbarrier.apply()
        print(before, barrier_calls())
    """)
    done = subprocess.run([sys.executable, "-c", probe], check=False, capture_output=True, text=True, timeout=50)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["add,wait", "none"]
