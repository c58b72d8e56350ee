"""Every name torch gives NCCL carries CUDA tensors, and a group on it is bound to the rank's device."""

from __future__ import annotations

import pytest

from pai_launch import backends

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("name", ["nccl", "NCCL", "nccl2", "nccl-legacy", "nccl-lazy", "cpu:gloo,cuda:nccl",
                                  "cuda:nccl2", "cpu:gloo, cuda:nccl-legacy"])
def test_every_nccl_name_runs_on_nccl(name):
    assert backends.uses_nccl(name)


@pytest.mark.parametrize("name", ["gloo", "cpu:gloo", "mpi", "ucc", "xccl", "fake", "undefined", ""])
def test_other_backends_do_not(name):
    assert not backends.uses_nccl(name)


def test_a_group_without_a_cuda_backend_has_no_nccl_class():
    class CpuOnly:
        def _get_backend(self, device):
            raise RuntimeError("No backend type associated with device type cuda")

    assert backends.group_kind(CpuOnly()) is None
    assert backends.group_kind(object()) is None


def test_the_nccl_class_is_the_backend_objects_own():
    class ProcessGroupNCCL2:
        pass

    class Group:
        def _get_backend(self, device):
            return ProcessGroupNCCL2()

    assert backends.group_kind(Group()) == "ProcessGroupNCCL2"


@pytest.mark.parametrize("version, flag, builds", [
    ("2.15.0+cu132", None, "ProcessGroupNCCL2"), ("2.15.0", "1", "ProcessGroupNCCL2"),
    ("2.15.1", "0", "ProcessGroupNCCL "),
    ("2.14.1", None, "ProcessGroupNCCL "), ("2.14.0", "1", "ProcessGroupNCCL2"), ("2.13.0", "1", "ProcessGroupNCCL"),
    ("2.4.1", None, "ProcessGroupNCCL"), ("3.0.0a0+git", None, "ProcessGroupNCCL2")])
def test_what_nccl_means_on_each_torch(version, flag, builds):
    assert backends.nccl_meaning(version, flag).startswith(builds)
