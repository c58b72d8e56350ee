"""What the supervisor shows and tells: its console streams, its log, the live line, the run's views, the Prometheus
metrics and the port that serves them, and systemd's notifications.

Runs in: the supervisor (pai-launch itself).
May import: what supervise may, and of supervise only outputs: every other group writes through these, so they sit at
the bottom.

This __init__ stays empty: the forkserver, warm workers and training scripts import the package.
"""
