"""Reading the Slurm allocation from scripted SLURM_* environments, and expanding Slurm host lists.

Every problem must be a SlurmError with a one-line message that names the variable and its value.
"""

from __future__ import annotations

import dataclasses

import pytest

from pai_launch.placement.slurm import SlurmAllocation, SlurmError, expand_nodelist, from_env


def job_env(**overrides: str | None) -> dict[str, str]:
    """A two-node srun environment on node 1; an override of None removes that variable."""
    env = {
        "SLURM_JOB_ID": "4242",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_NNODES": "2",
        "SLURM_JOB_NODELIST": "gpu[01-02]",
        "SLURM_NODELIST": "gpu[01-02]",
        "SLURM_NODEID": "1",
        "HOSTNAME": "gpu02",
    }
    for name, value in overrides.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def slurm_error(env: dict[str, str]) -> str:
    """The message of the SlurmError that from_env raises for `env`, checked to be one line."""
    with pytest.raises(SlurmError) as raised:
        from_env(env)
    message = str(raised.value)
    assert message and "\n" not in message, message
    return message


# --- expand_nodelist --------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "hosts"), [
    ("gpu[01-04,07]", ("gpu01", "gpu02", "gpu03", "gpu04", "gpu07")),
    ("a-[1-2]-[01-02]", ("a-1-01", "a-1-02", "a-2-01", "a-2-02")),
    ("node1,node3,gpu[1-2]", ("node1", "node3", "gpu1", "gpu2")),
    ("node7", ("node7",)),
    ("nid-001.cluster", ("nid-001.cluster",)),
    ("nid-[001-002].cluster", ("nid-001.cluster", "nid-002.cluster")),
    ("gpu[8-10]", ("gpu8", "gpu9", "gpu10")),
    ("gpu[098-101]", ("gpu098", "gpu099", "gpu100", "gpu101")),
], ids=lambda value: value if isinstance(value, str) else None)
def test_a_host_list_expands_to_its_hosts(text, hosts):
    assert expand_nodelist(text) == hosts


def test_the_host_order_is_the_lists_order_not_sorted():
    assert expand_nodelist("zeta,gpu[10,02],alpha") == ("zeta", "gpu10", "gpu02", "alpha")


def test_the_expansion_is_a_tuple():
    assert isinstance(expand_nodelist("gpu[1-2]"), tuple)


def test_a_repeated_host_is_kept_so_a_wrong_count_shows():
    assert expand_nodelist("gpu[1-2],gpu1") == ("gpu1", "gpu2", "gpu1")


@pytest.mark.parametrize(("text", "hosts"), [
    ("[1-2]", ("1", "2")),
    ("gpu[007]", ("gpu007",)),
    ("gpu[01-100]", ("gpu01",) + tuple(f"gpu{n:02d}" for n in range(2, 101))),
    ("gpu[0-10]", tuple(f"gpu{n}" for n in range(11))),
    ("gpu[5-5]", ("gpu5",)),
    ("rack[1-2]n[3,1]", ("rack1n3", "rack1n1", "rack2n3", "rack2n1")),
    ("a[1-2]b[3-4]c[5-6]", ("a1b3c5", "a1b3c6", "a1b4c5", "a1b4c6", "a2b3c5", "a2b3c6", "a2b4c5", "a2b4c6")),
    ("gpu[1-2]-ib,gpu[3].x", ("gpu1-ib", "gpu2-ib", "gpu3.x")),
    ("n[1-2],m[10-11],n[1]", ("n1", "n2", "m10", "m11", "n1")),
    ("x[1-2,1-2]", ("x1", "x2", "x1", "x2")),
], ids=lambda value: value if isinstance(value, str) else None)
def test_more_host_lists_expand_in_order_leftmost_group_outermost(text, hosts):
    assert expand_nodelist(text) == hosts


def test_deep_input_expands_without_recursion():
    assert expand_nodelist("a[1]" * 3000) == ("a1" * 3000,)


def test_a_host_list_of_exactly_the_cap_expands():
    hosts = expand_nodelist("x[1-100000]")

    assert (len(hosts), hosts[0], hosts[-1]) == (100_000, "x1", "x100000")


@pytest.mark.parametrize(("text", "reason"), [
    ("gpu[01-", "unbalanced brackets"),
    ("gpu]01[", "unbalanced brackets"),
    ("gpu[1-2]]", "unbalanced brackets"),
    ("gpu1]", "unbalanced brackets"),
    ("gpu[1-2],[", "unbalanced brackets"),
    ("gpu[[1-2]]", "nested brackets"),
    ("gpu[1,[2]]", "nested brackets"),
    ("gpu[04-01]", "bad range '04-01': its start is above its end"),
    ("gpu[a-b]", "bad range 'a-b'"),
    ("gpu[1-]", "bad range '1-'"),
    ("gpu[-1]", "bad range '-1'"),
    ("gpu[1-2-3]", "bad range '1-2-3'"),
    ("gpu[+1]", "bad range '+1'"),
    ("gpu[\u0661-\u0662]", "bad range"),
    ("x[1-" + "9" * 19 + "]", "bad range"),
    ("x[" + "9" * 5000 + "]", "bad range"),
    ("gpu[]", "empty brackets"),
    ("gpu[1-2][]", "empty brackets"),
    ("gpu[1,,2]", "empty item"),
    ("gpu[1,]", "empty item"),
    ("gpu1,,gpu2", "empty host name"),
    ("gpu1,", "empty host name"),
    (",gpu1", "empty host name"),
    ("", "names no host"),
    (",", "names no host"),
    ("gpu1, gpu2", "whitespace"),
    ("gpu1\n", "whitespace"),
    ("gpu[1 -2]", "whitespace"),
    ("gpu\t1", "whitespace"),
    ("x[1-100000000]", "more than 100000 hosts"),
    ("x[1-100001]", "more than 100000 hosts"),
    ("x[1-50000],y[1-50001]", "more than 100000 hosts"),
    ("x[1-1000][1-1000]", "more than 100000 hosts"),
    ("x[1-999999999999999999]", "more than 100000 hosts"),
    ("a[1-99999]" * 1000, "more than 100000 hosts"),
    ("a[1-2]" * 3000, "more than 100000 hosts"),
])
def test_a_malformed_host_list_is_a_one_line_slurm_error_with_the_reason(text, reason):
    with pytest.raises(SlurmError) as raised:
        expand_nodelist(text)

    message = str(raised.value)
    assert "\n" not in message, message
    assert reason in message, message
    assert message.startswith(f"node list {text!r} cannot be parsed:"), message
    assert message.endswith("write it the way Slurm does, e.g. 'gpu[01-04,07]' or 'node1,node3'"), message


def test_slurm_error_is_a_value_error():
    assert issubclass(SlurmError, ValueError)


# --- outside Slurm ----------------------------------------------------------------------------------
def test_no_slurm_job_id_is_no_allocation():
    assert from_env({"HOSTNAME": "gpu01", "PATH": "/usr/bin"}) is None


def test_other_slurm_variables_without_a_job_id_are_no_allocation():
    assert from_env(job_env(SLURM_JOB_ID=None)) is None


def test_an_empty_slurm_job_id_is_no_allocation():
    assert from_env(job_env(SLURM_JOB_ID="")) is None


# --- a well-formed job -------------------------------------------------------------------------------
def test_an_srun_environment_gives_the_whole_allocation():
    allocation = from_env(job_env())

    assert allocation == SlurmAllocation(
        job_id="4242", nnodes=2, node_rank=1, first_host="gpu01", hosts=("gpu01", "gpu02"),
        gpus_on_node=None, restart_count=0,
        source={"job_id": "SLURM_JOB_ID", "nnodes": "SLURM_JOB_NUM_NODES", "node_rank": "SLURM_NODEID",
                "hosts": "SLURM_JOB_NODELIST", "first_host": "SLURM_JOB_NODELIST"},
    )


def test_the_first_host_is_the_first_of_the_list_in_its_order():
    env = job_env(SLURM_JOB_NUM_NODES="3", SLURM_NNODES="3", SLURM_JOB_NODELIST="zeta,gpu[02,01]")

    allocation = from_env(env)

    assert allocation.hosts == ("zeta", "gpu02", "gpu01")
    assert allocation.first_host == "zeta"


def test_the_node_rank_comes_from_slurm_nodeid_not_the_hostname():
    # Fake nodes on one machine share a hostname; each still has its own SLURM_NODEID.
    env = job_env(HOSTNAME="gpu01", SLURM_NODEID="1")

    assert from_env(env).node_rank == 1
    assert from_env({**env, "SLURM_NODEID": "0", "HOSTNAME": "gpu02"}).node_rank == 0


def test_a_batch_script_on_a_multi_node_job_is_node_0_as_it_is():
    env = job_env(SLURM_JOB_NUM_NODES="4", SLURM_NNODES="4", SLURM_JOB_NODELIST="gpu[1-4]", SLURM_NODEID="0")

    allocation = from_env(env)

    assert (allocation.nnodes, allocation.node_rank, allocation.first_host) == (4, 0, "gpu1")


def test_a_single_node_job():
    env = job_env(SLURM_JOB_NUM_NODES="1", SLURM_NNODES="1", SLURM_JOB_NODELIST="nid-001.cluster", SLURM_NODEID="0")

    allocation = from_env(env)

    assert (allocation.nnodes, allocation.hosts, allocation.first_host) == (1, ("nid-001.cluster",), "nid-001.cluster")


def test_slurm_job_num_nodes_wins_over_slurm_nnodes():
    env = job_env(SLURM_JOB_NUM_NODES="2", SLURM_NNODES="5")

    allocation = from_env(env)

    assert allocation.nnodes == 2
    assert allocation.source["nnodes"] == "SLURM_JOB_NUM_NODES"


def test_slurm_nnodes_is_the_node_count_when_slurm_job_num_nodes_is_unset():
    env = job_env(SLURM_JOB_NUM_NODES=None, SLURM_NNODES="3", SLURM_JOB_NODELIST="gpu[1-3]")

    allocation = from_env(env)

    assert allocation.nnodes == 3
    assert allocation.source["nnodes"] == "SLURM_NNODES"


def test_slurm_job_nodelist_wins_over_slurm_nodelist():
    env = job_env(SLURM_JOB_NODELIST="gpu[01-02]", SLURM_NODELIST="other[1-2]")

    allocation = from_env(env)

    assert allocation.hosts == ("gpu01", "gpu02")
    assert allocation.source["hosts"] == "SLURM_JOB_NODELIST"


def test_slurm_nodelist_is_the_host_list_when_slurm_job_nodelist_is_unset():
    env = job_env(SLURM_JOB_NODELIST=None, SLURM_NODELIST="a-[1-2]")

    allocation = from_env(env)

    assert allocation.hosts == ("a-1", "a-2")
    assert allocation.source["hosts"] == allocation.source["first_host"] == "SLURM_NODELIST"


def test_an_allocation_is_frozen():
    allocation = from_env(job_env())

    with pytest.raises(dataclasses.FrozenInstanceError):
        allocation.node_rank = 0


def test_an_allocation_is_hashable_despite_its_source_dict():
    allocation = from_env(job_env())

    assert hash(allocation) == hash(from_env(job_env()))


# --- SLURM_GPUS_ON_NODE -------------------------------------------------------------------------------
def test_no_slurm_gpus_on_node_is_none():
    allocation = from_env(job_env())

    assert allocation.gpus_on_node is None
    assert "gpus_on_node" not in allocation.source


@pytest.mark.parametrize(("text", "count"), [("8", 8), ("1", 1), ("0", 0)])
def test_slurm_gpus_on_node_is_the_gpu_count(text, count):
    allocation = from_env(job_env(SLURM_GPUS_ON_NODE=text))

    assert allocation.gpus_on_node == count
    assert allocation.source["gpus_on_node"] == "SLURM_GPUS_ON_NODE"


@pytest.mark.parametrize("text", ["-1", "two", "1.5", "4(x2)"])
def test_a_bad_slurm_gpus_on_node_is_an_error(text):
    message = slurm_error(job_env(SLURM_GPUS_ON_NODE=text))

    assert f"SLURM_GPUS_ON_NODE {text!r}" in message, message


# --- SLURM_RESTART_COUNT ------------------------------------------------------------------------------
def test_no_slurm_restart_count_is_restart_0():
    allocation = from_env(job_env())

    assert allocation.restart_count == 0
    assert "restart_count" not in allocation.source


@pytest.mark.parametrize(("text", "count"), [("0", 0), ("1", 1), ("12", 12)])
def test_slurm_restart_count_is_the_restart_count(text, count):
    allocation = from_env(job_env(SLURM_RESTART_COUNT=text))

    assert allocation.restart_count == count
    assert allocation.source["restart_count"] == "SLURM_RESTART_COUNT"


def test_a_bad_slurm_restart_count_is_an_error():
    message = slurm_error(job_env(SLURM_RESTART_COUNT="-2"))

    assert "SLURM_RESTART_COUNT '-2'" in message, message


# --- the node count -----------------------------------------------------------------------------------
def test_no_node_count_is_an_error_naming_both_variables():
    message = slurm_error(job_env(SLURM_JOB_NUM_NODES=None, SLURM_NNODES=None))

    assert "SLURM_JOB_NUM_NODES" in message and "SLURM_NNODES" in message, message


@pytest.mark.parametrize("text", ["0", "-2", "two", "2.0", " 2", "+2", "\u0662"])
def test_a_node_count_that_is_not_a_positive_integer_is_an_error(text):
    message = slurm_error(job_env(SLURM_JOB_NUM_NODES=text))

    assert f"SLURM_JOB_NUM_NODES {text!r} is not a positive integer" in message, message


# --- the node list ------------------------------------------------------------------------------------
def test_no_node_list_is_an_error_naming_both_variables():
    message = slurm_error(job_env(SLURM_JOB_NODELIST=None, SLURM_NODELIST=None))

    assert "SLURM_JOB_NODELIST" in message and "SLURM_NODELIST" in message, message


def test_a_malformed_node_list_is_an_error_naming_the_variable_and_the_reason():
    message = slurm_error(job_env(SLURM_JOB_NODELIST="gpu[01-"))

    assert message.startswith("SLURM_JOB_NODELIST 'gpu[01-' cannot be parsed: unbalanced brackets"), message


def test_a_malformed_fallback_node_list_names_the_fallback_variable():
    message = slurm_error(job_env(SLURM_JOB_NODELIST=None, SLURM_NODELIST="gpu[2-1]"))

    assert message.startswith("SLURM_NODELIST 'gpu[2-1]' cannot be parsed: bad range '2-1': its start is above its "
                              "end"), message


def test_a_node_list_with_more_hosts_than_nodes_is_an_error():
    message = slurm_error(job_env(SLURM_JOB_NODELIST="gpu[01-03]"))

    assert "SLURM_JOB_NODELIST 'gpu[01-03]' names 3 host(s) but SLURM_JOB_NUM_NODES is 2" in message, message


def test_a_node_list_with_fewer_hosts_than_nodes_is_an_error_naming_the_count_variable_used():
    message = slurm_error(job_env(SLURM_JOB_NUM_NODES=None, SLURM_NNODES="4", SLURM_NODEID="0"))

    assert "names 2 host(s) but SLURM_NNODES is 4" in message, message


def test_a_node_list_naming_a_host_twice_is_an_error():
    message = slurm_error(job_env(SLURM_JOB_NODELIST="gpu[1-2],gpu1", SLURM_JOB_NUM_NODES="3", SLURM_NNODES="3"))

    assert "names host 'gpu1' more than once" in message, message


def test_a_node_list_with_a_newline_stays_a_one_line_error():
    message = slurm_error(job_env(SLURM_JOB_NODELIST="gpu01\ngpu02"))

    assert "'gpu01\\ngpu02'" in message, message


# --- the node rank ------------------------------------------------------------------------------------
def test_no_slurm_nodeid_is_an_error_saying_how_to_get_one():
    message = slurm_error(job_env(SLURM_NODEID=None))

    assert message.startswith("SLURM_NODEID is not set"), message
    assert "srun" in message, message


@pytest.mark.parametrize("text", ["2", "7", "-1", "one", "1.0", " 1"])
def test_a_slurm_nodeid_outside_the_job_is_an_error(text):
    message = slurm_error(job_env(SLURM_NODEID=text))

    assert f"SLURM_NODEID {text!r} is not an integer from 0 to 1" in message, message


def test_the_last_node_id_is_in_range():
    assert from_env(job_env(SLURM_NODEID="1")).node_rank == 1


def test_every_environment_error_says_how_to_fix_it():
    broken = [
        job_env(SLURM_JOB_NUM_NODES="0"),
        job_env(SLURM_JOB_NODELIST="gpu[01-"),
        job_env(SLURM_JOB_NODELIST="gpu[01-03]"),
        job_env(SLURM_NODEID="9"),
        job_env(SLURM_RESTART_COUNT="x"),
    ]

    for env in broken:
        message = slurm_error(env)
        assert "unset SLURM_JOB_ID" in message and "srun" in message, message


def test_under_srun_the_job_steps_nodes_are_the_ones_that_count():
    from pai_launch.placement.slurm import from_env

    env = {"SLURM_JOB_ID": "5", "SLURM_JOB_NUM_NODES": "4", "SLURM_JOB_NODELIST": "n[1-4]", "SLURM_NODEID": "1",
           "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_NODELIST": "n[3-4]"}
    allocation = from_env(env)

    assert (allocation.nnodes, allocation.first_host, allocation.node_rank) == (2, "n3", 1)
    assert allocation.source["nnodes"] == "SLURM_STEP_NUM_NODES" and allocation.source["first_host"] == \
        "SLURM_STEP_NODELIST"
