"""`pai-launch env`: what a bug report needs, from this machine and the interpreter a run would use.

Runs in: the tool's process, but for `probe`, which runs in the run's interpreter (as `python -c` of its source).
May import: linux (the OS layer) and the stdlib; `probe` imports torch, and nothing of pai_launch.

This __init__ stays empty: the forkserver, warm workers and training scripts import the package.
"""
