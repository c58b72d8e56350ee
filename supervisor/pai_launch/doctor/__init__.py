"""`pai-launch doctor`: reads a training script and its helper modules with ast and names what will crash or hang.

Runs in: the tool's process, and the supervisor before a run.
May import: the stdlib and doctor only (pure: ast, never runs the script).

This __init__ stays empty: the forkserver, warm workers and training scripts import the package.
"""
