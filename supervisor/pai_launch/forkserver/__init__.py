"""What runs inside the agent's forkserver and its warm workers, and so inside the user's training processes.

Runs in: the forkserver and the warm workers.
May import: the stdlib and forkserver only.

This __init__ stays empty: the forkserver, warm workers and training scripts import the package.
"""
