"""The save folder's format: PerforatedAI's files pai-launch reads (pai_files), its own SAVE/.pai-launch state, locks,
checkpoint checks and atomic writes.

Runs in: the supervisor, the agent, the read-only tools and the training script (pai_launch.training).
May import: the stdlib, wire and savefmt only.

This __init__ stays empty: the forkserver, warm workers and training scripts import the package.
"""
