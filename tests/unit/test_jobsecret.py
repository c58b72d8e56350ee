"""The job's secret: the store's key names and sealed values, the secret file node 0 writes (0600, fresh, never
through a link) and the other nodes read, and where node 0's store listens."""

from __future__ import annotations

import json
import os
import socket
import stat

import pytest

from pai_launch.linux import listen
from pai_launch.wire import codec, crossnode, jobsecret, storevalues
from pai_launch.wire.storelink import JobStopped, StoreLink
from pai_launch.wire.storevalues import NodeOutcome
from tests.memstore import MemoryStore

pytestmark = pytest.mark.timeout(30)


def test_every_key_but_the_public_info_is_named_by_the_secret_and_the_names_do_not_contain_it():
    store = MemoryStore()
    link = StoreLink(store, 1, "s3cret" * 6)
    link.put(crossnode.STOP, storevalues.StopFlag(15, "x"))
    link.set(crossnode.gen_key(1, "result", 0), "{}")
    link.add(crossnode.gen_key(1, "beat", 1), 1)
    link.put(crossnode.INFO, storevalues.StoreInfo())

    assert crossnode.INFO.name in store.values
    assert crossnode.STOP.name not in store.values and crossnode.gen_key(1, "result", 0) not in store.values
    assert all(key == crossnode.INFO.name or key.startswith("pai/j/") for key in store.values)
    assert not [key for key in store.values if "s3cret" in key]
    assert jobsecret.namespaced("a", crossnode.STOP.name) != jobsecret.namespaced("b", crossnode.STOP.name)
    assert jobsecret.namespaced("a", "torch.rendezvous.job-g1") == "torch.rendezvous.job-g1", "torch's keys are torch's"


def test_a_stop_flag_or_result_set_without_the_secret_is_not_seen():
    store = MemoryStore()
    link = StoreLink(store, 1, "the-secret")
    outsider = codec.encode_text(storevalues.StopFlag(15, "outsider"))
    store.set(crossnode.STOP.name, outsider)  # the old, plain name
    store.set(jobsecret.namespaced("guess", crossnode.STOP.name), outsider)
    forged = codec.encode_text(NodeOutcome(0, "x", error="forged"))
    store.set(link.key(crossnode.gen_key(1, "result", 0)), forged)  # the right name (listed), an unsealed value
    link.check_stop()
    assert link.outcome(1, 0) is None
    assert link.publish(1, NodeOutcome(0, "x")), "a value without the secret holds no node's place"
    assert link.outcome(1, 0) == NodeOutcome(0, "x")

    # A sealed value copied to another key does not pass there either.
    link.publish(1, NodeOutcome(1, "y"))
    store.set(link.key(crossnode.gen_key(1, "result", 2)), store.get(link.key(crossnode.gen_key(1, "result", 1))))
    assert link.outcome(1, 2) is None
    assert link.outcome(1, 1) == NodeOutcome(1, "y")

    link.put(crossnode.STOP, storevalues.StopFlag(15, "node 0"))
    with pytest.raises(JobStopped, match="node 0"):
        link.check_stop()


def test_seal_and_unseal_round_trip_and_refuse_a_changed_value():
    sealed = jobsecret.seal("k", "pai/stop", json.dumps({"a": 1}))
    assert jobsecret.unseal("k", "pai/stop", sealed) == json.dumps({"a": 1})
    assert jobsecret.unseal("other", "pai/stop", sealed) is None
    assert jobsecret.unseal("k", "pai/stop", sealed.replace("1", "2")) is None
    assert jobsecret.unseal("k", "pai/stop", "no tag") is None


def test_the_secret_file_is_0600_replaced_afresh_and_read_only_when_its_digest_matches(tmp_path):
    old = tmp_path / jobsecret.SECRET_FILE
    old.parent.mkdir()
    old.write_text("a previous run's\n")
    old.chmod(0o644)
    secret = jobsecret.new_secret()
    path = jobsecret.write(tmp_path, secret)

    assert path == old and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert jobsecret.read(tmp_path, jobsecret.digest(secret)) == secret
    assert jobsecret.read(tmp_path, jobsecret.digest("a previous run's")) is None
    assert jobsecret.read(tmp_path / "elsewhere", jobsecret.digest(secret)) is None


def test_a_link_at_the_secret_files_place_is_replaced_never_followed(tmp_path):
    target = tmp_path / "users-file"
    target.write_text("keep me\n")
    link = tmp_path / jobsecret.SECRET_FILE
    link.parent.mkdir()
    link.symlink_to(target)
    jobsecret.write(tmp_path, "fresh")

    assert target.read_text() == "keep me\n"
    assert not link.is_symlink() and link.read_text() == "fresh\n"
    os.unlink(link)
    link.symlink_to(target)
    assert jobsecret.read(tmp_path, jobsecret.digest("keep me")) is None, "a link is not read"


def test_a_secret_file_that_cannot_be_written_is_one_line_naming_the_path(tmp_path):
    (tmp_path / jobsecret.SECRET_FILE).mkdir(parents=True)  # a folder where the file goes
    with pytest.raises(jobsecret.SecretError, match=r"cannot write the job's secret to .*coordinator"):
        jobsecret.write(tmp_path, "x")


@pytest.mark.parametrize(("host", "resolved", "expected"), [
    ("127.0.0.1", ["127.0.0.1"], "127.0.0.1"),
    ("10.0.0.1", ["10.0.0.1"], "10.0.0.1"),
    ("::1", ["::1"], "::1"),
    ("localhost", ["127.0.0.1", "::1"], "127.0.0.1"),
    ("localhost", ["::1"], "::1"),
    # Names: the others resolve them on their machines (Debian maps a host's own name to 127.0.1.1 locally).
    ("node0", ["127.0.1.1"], "0.0.0.0"),
    ("node0.cluster", ["10.0.0.1"], "0.0.0.0"),
    ("node0", ["fd00::1"], "::"),
    ("unresolvable", [], "0.0.0.0"),
])
def test_the_store_listens_on_the_endpoints_address_and_on_every_interface_only_for_a_host_name(host, resolved,
                                                                                                expected):
    assert listen.listen_address(host, resolved) == expected


def test_the_bound_socket_listens_on_loopback_only_and_an_address_not_ours_is_refused():
    sock = listen.bound_socket("127.0.0.1", 0)
    try:
        assert sock.getsockname()[0] == "127.0.0.1" and listen.client_host(sock) == "127.0.0.1"
    finally:
        sock.close()
    with pytest.raises(OSError, match="cannot listen on 192.0.2.1") as refused:
        listen.bound_socket("192.0.2.1", 0)  # TEST-NET-1: never this machine's
    assert "192.0.2.1 is not an address of this machine" in listen.bind_problem(refused.value, "192.0.2.1", 1)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match="cannot listen on 127.0.0.1") as busy:
            listen.bound_socket("127.0.0.1", port)
    assert f"port {port} is taken: choose a free port" in listen.bind_problem(busy.value, "127.0.0.1", port)


STORE_SAMPLES = {
    storevalues.StoreInfo: storevalues.StoreInfo("ab12", jobsecret.SECRET_FILE),
    storevalues.JobFacts: storevalues.JobFacts("run-1", "job-1", {"script": "train.py", "nnodes": "2:2"}, 2, 2),
    storevalues.OpenedGeneration: storevalues.OpenedGeneration(3, 1),
    storevalues.StopFlag: storevalues.StopFlag(15, "SIGTERM to node 1's pai-launch"),
    storevalues.Member: storevalues.Member(1, "h1", 1, (2, 3)),
    NodeOutcome: NodeOutcome(1, "h1", stopping=(15, "x")),
}


def test_every_store_value_round_trips_through_a_sealed_key_as_its_own_type():
    assert set(storevalues.STORE.types().values()) == set(STORE_SAMPLES), "a store value type without a sample here"
    link = StoreLink(MemoryStore(), 1, "the-secret")
    for cls, value in STORE_SAMPLES.items():
        key = crossnode.ValueKey(f"pai/test/{cls.__name__}", cls)
        link.put(key, value)
        back = link.read(key)
        assert back == value and type(back) is cls


def test_a_typed_key_refuses_a_value_of_another_type_both_ways():
    link = StoreLink(MemoryStore(), 1, "the-secret")
    with pytest.raises(TypeError, match="pai/stop holds a StopFlag, not a OpenedGeneration"):
        link.put(crossnode.STOP, storevalues.OpenedGeneration(1, 0))
    link.set(crossnode.STOP, codec.encode_text(storevalues.OpenedGeneration(1, 0)))  # sealed, but of the wrong type
    with pytest.raises(codec.WireError, match="'opened' message where 'stop' was expected"):
        link.read(crossnode.STOP)


def test_every_store_pipe_message_round_trips_and_a_stray_line_is_named():
    from pai_launch.wire import storepipe

    samples = [storepipe.Secret("s" * 43),
               storepipe.SetValue("pai/stop", codec.encode_text(storevalues.StopFlag(15, "x"))),
               storepipe.Serving(), storepipe.Refused("cannot serve the job's store at h:1: port taken"),
               storepipe.JobJoined(STORE_SAMPLES[storevalues.JobFacts], "secret"),
               storepipe.StopCarried(storevalues.StopFlag(15, "SIGTERM to node 0's pai-launch")),
               storepipe.StoreClosed(), storepipe.StoreGone("DistNetworkError: connection reset")]
    for message in samples:
        protocol = storepipe.TO_STORE if type(message) in storepipe.TO_STORE.types().values() else storepipe.FROM_STORE
        assert protocol.decode(codec.encode(message)) == message
    assert {type(m) for m in samples} == {*storepipe.TO_STORE.types().values(), *storepipe.FROM_STORE.types().values()}
    with pytest.raises(codec.WireError, match="unknown message type 'ready'"):
        storepipe.FROM_STORE.decode(b'{"type": "ready"}')
