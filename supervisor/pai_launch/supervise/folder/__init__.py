"""The save folder as the supervisor holds it: the session (everything under SAVE/), the folder's faults in words and
--fresh's move aside, the watch on its files, and the log folder's space.

Runs in: the supervisor (pai-launch itself).
May import: what supervise may, and of supervise: folder, outputs and job; never the loop or the children group.

This __init__ stays empty: the forkserver, warm workers and training scripts import the package.
"""
