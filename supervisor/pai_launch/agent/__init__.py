"""The agent: torch.distributed.elastic runs one generation per request from the supervisor; it relays the workers'
output and keeps the warm pool.

Runs in: the agent (`python -m pai_launch.agent.main`, started by supervise.children.agent_process).
May import: torch, psutil, wire, savefmt, linux, store.client and forkserver (the preload's name); never core,
supervise, cli, typer, structlog or watchdog.

This __init__ stays empty: the forkserver, warm workers and training scripts import the package.
"""
