"""The processes the supervisor starts and keeps: the process table, the node's agent, the init run or DataParallel
process, node 0's job store process and the other nodes' watch of it (coordination), where a child's output goes, the
helper threads that wait on them, and the signal handlers.

Runs in: the supervisor (pai-launch itself).
May import: what supervise may, and of supervise: children, outputs and job; never the loop or the folder group.

This __init__ stays empty: the forkserver, warm workers and training scripts import the package.
"""
