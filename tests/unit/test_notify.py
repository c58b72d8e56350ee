"""The notify protocol's sender and the status line it carries, against a real datagram socket."""

from __future__ import annotations

import socket
import uuid

from pai_launch.core.machine import Phase, Policy, State
from pai_launch.core.reports import phase_status
from pai_launch.supervise.outputs.notify import Notifier, child_env


def listen():
    name = f"pai-launch-unit-{uuid.uuid4().hex}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    sock.settimeout(1.0)
    return sock, "@" + name


def received(sock) -> list[str]:
    sock.settimeout(0.05)
    found = []
    try:
        while True:
            found.append(sock.recv(4096).decode())
    except socket.timeout:
        return found


def test_ready_carries_the_status_kept_before_it_and_stopping_is_last():
    sock, address = listen()
    notifier = Notifier({"NOTIFY_SOCKET": address}, pid=1234)
    notifier.status("init run")  # before READY=1: kept, not sent
    notifier.ready()
    notifier.ready()
    notifier.report("generation 1 running", stopping=False)
    notifier.status("generation 1 running; dendrites added (switch_2.pt)")
    notifier.report("generation 1 running", stopping=False)  # unchanged phase: the finer status stays
    notifier.report("stopping: stopped by SIGTERM", stopping=True)
    notifier.report("finished with exit code 143: stopped by SIGTERM", stopping=True)
    notifier.status("late")
    assert received(sock) == ["READY=1\nSTATUS=init run", "STATUS=generation 1 running",
                              "STATUS=generation 1 running; dendrites added (switch_2.pt)",
                              "STOPPING=1\nSTATUS=stopping: stopped by SIGTERM"]
    notifier.close()


def test_watchdog_every_half_period_from_ready_on_and_only_for_our_pid():
    sock, address = listen()
    env = {"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "1000000"}
    notifier = Notifier(env, pid=42)
    assert notifier.watchdog_interval == 0.5
    notifier.watchdog(0.0)  # not ready yet: nothing
    notifier.ready()
    for now in (10.0, 10.2, 10.5, 10.9, 11.0):
        notifier.watchdog(now)
    assert received(sock)[1:] == ["WATCHDOG=1"] * 3  # at 10.0, 10.5 and 11.0
    assert Notifier({**env, "WATCHDOG_PID": "42"}, pid=42).watchdog_interval == 0.5
    assert Notifier({**env, "WATCHDOG_PID": "7"}, pid=42).watchdog_interval is None
    assert Notifier({**env, "WATCHDOG_USEC": "0"}, pid=42).watchdog_interval is None
    assert Notifier({"WATCHDOG_USEC": "1000000"}, pid=42).watchdog_interval is None  # no socket: nothing at all


def test_without_a_listener_or_a_socket_nothing_fails():
    for env in ({}, {"NOTIFY_SOCKET": "/nonexistent/socket"}, {"NOTIFY_SOCKET": "@nobody-listens-here"}):
        notifier = Notifier({**env, "WATCHDOG_USEC": "1000"}, pid=1)
        notifier.ready()
        notifier.watchdog(5.0)
        notifier.report("stopping: x", stopping=True)
        notifier.close()
    assert not Notifier({}, pid=1).active


def test_children_get_no_notify_variables():
    env = {"NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "1", "WATCHDOG_PID": "2", "PATH": "/bin"}
    assert child_env(env) == {"PATH": "/bin"}


def test_the_status_line_names_the_phase():
    policy = Policy(max_failures=3)
    assert phase_status(State(phase=Phase.INIT), policy) == "init run (--perforate_model_parallel)"
    assert phase_status(State(phase=Phase.TRAINING, generation=4), policy) == "generation 4 running"
    assert phase_status(State(phase=Phase.TRAINING, generation=4, failures=1), policy) == \
        "generation 4 running (after 1 failed attempt(s))"
    assert phase_status(State(phase=Phase.TRAINING, generation=4), policy,
                        dendrites=1) == "generation 4 running; 1 dendrite"
    assert phase_status(State(phase=Phase.TRAINING, generation=4), policy,
                        dendrites=2) == "generation 4 running; 2 dendrites"
    assert phase_status(State(phase=Phase.BACKOFF, failures=2, reason="rank 1 failed with exit code 3"), policy) == \
        "retrying after failure 2 of 3: rank 1 failed with exit code 3"
    assert phase_status(State(phase=Phase.STOPPING, reason="stopped by SIGTERM"),
                        policy) == "stopping: stopped by SIGTERM"
    assert phase_status(State(phase=Phase.DONE, exit_code=0, reason="training complete"), policy) == \
        "finished with exit code 0: training complete"
