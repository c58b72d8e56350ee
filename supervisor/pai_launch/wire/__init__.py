"""The formats that cross process boundaries: the supervisor<->agent pipe protocol, the job store's keys and values,
the failure causes every process names.

Runs in: every process (supervisor, agent, job store).
May import: the stdlib and wire only (pure).

This __init__ stays empty: the forkserver, warm workers and training scripts import the package.
"""
