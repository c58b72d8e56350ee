"""The supervisor's process: the runner that carries out the machine's actions, its threads and signal handlers, its
logs and views, the agent and job store it starts.

Runs in: the supervisor (pai-launch itself).
May import: core, placement, wire, savefmt, linux, doctor, psutil, structlog, watchdog, prometheus_client; never
torch, the agent, the forkserver, the store or the status tool.

This __init__ stays empty: the forkserver, warm workers and training scripts import the package.
"""
