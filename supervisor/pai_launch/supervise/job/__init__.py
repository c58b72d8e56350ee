"""The job's commands: every argv, environment and working directory pai-launch runs, built by pure functions that the
real launch and --dry-run share, so the plan printed is the plan run.

Runs in: the supervisor (pai-launch itself).
May import: what supervise may, and of supervise only job.

This __init__ stays empty: the forkserver, warm workers and training scripts import the package.
"""
