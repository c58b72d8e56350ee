"""The thin OS layer several processes share: process trees, private temporary folders, listening sockets, limits.

Runs in: the supervisor, the agent and the job store.
May import: psutil, the stdlib, wire, savefmt and linux.

This __init__ stays empty: the forkserver, warm workers and training scripts import the package.
"""
