"""The run's decisions: the pure state machine (machine.step), its events, actions, state and outcomes, the exit codes
it ends with, and the health probes' judgement of a run.

Runs in: the supervisor.
May import: the stdlib, wire, savefmt and core; never placement, an OS layer (os, subprocess, sockets, threads) or
the clock: time arrives on events.

This __init__ stays empty: the forkserver, warm workers and training scripts import the package.
"""
