"""The run's decisions: the pure state machine (machine.step), its events, actions and state, the launch specification
and where a run sits among nodes.

Runs in: the supervisor.
May import: the stdlib, wire, savefmt and core; never an OS layer (os, subprocess, sockets, threads) or the clock:
time arrives on events.

This __init__ stays empty: the forkserver, warm workers and training scripts import the package.
"""
