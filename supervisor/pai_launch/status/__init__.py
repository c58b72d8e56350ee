"""`pai-launch status`: reads a run's save folder and log, never writes them.

Runs in: the tool's process.
May import: wire, savefmt, psutil and matplotlib (lazily); never core, supervise, agent or torch.

This __init__ stays empty: the forkserver, warm workers and training scripts import the package.
"""
