"""The supervisor's process, in five groups: loop (the runner that carries out the machine's actions, the translator,
the effects), children (the agent, the init run, the job store process, their threads and the signal handlers),
folder (the save folder and the log folder), outputs (console, logs, views, metrics) and job (the commands run).
The loop sits on top; lower groups never import it (tests/unit/test_layers.py holds each group to its own list).

Runs in: the supervisor (pai-launch itself).
May import: core, placement, wire, savefmt, linux, doctor, psutil, structlog, watchdog, prometheus_client; never
torch, the agent, the forkserver, the store or the status tool.

This __init__ stays empty: the forkserver, warm workers and training scripts import the package.
"""
