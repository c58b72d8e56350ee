"""Node 0's job store (a torch TCPStore in its own process) and the agents' client of it.

Runs in: the job store (`python -m pai_launch.store.server`, started by supervise.children.coordination) and, for
client, the agent.
May import: torch, wire, savefmt and linux; never core, placement, supervise or agent.

This __init__ stays empty: the forkserver, warm workers and training scripts import the package.
"""
