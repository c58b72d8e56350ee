"""Where a run is placed and the job's shape: the machines it spans (nodes), the scheduler or platform it runs under
(slurm, platforms, joboptions), the launch specification (spec) and the options checked among themselves (options,
seconds, pathnames, rankoutput). Pure values and checks, kept apart from the state machine, which needs none of them.

Runs in: the supervisor.
May import: the stdlib, wire, savefmt, core (the policy's vocabulary and the exit codes) and placement; never an OS
layer (os, subprocess, sockets, threads) or the clock. The core never imports placement.

This __init__ stays empty: the forkserver, warm workers and training scripts import the package.
"""
