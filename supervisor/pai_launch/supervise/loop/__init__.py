"""The supervisor's loop: the runner (next event, step the machine, carry out its actions), the translator that turns
what the inbox receives into the machine's events, and the effects that do what each action says. The top of
supervise: it drives every other group, and no other group imports it.

Runs in: the supervisor (pai-launch itself).
May import: what supervise may, and every group of supervise (children, folder, outputs, job).

This __init__ stays empty: the forkserver, warm workers and training scripts import the package.
"""
