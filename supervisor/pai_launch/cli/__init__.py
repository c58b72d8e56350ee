"""The command line: `pai-launch` (launch), `pai-launch status|doctor|env` (tools), the preflight and the start-up
before a run.

Runs in: the supervisor, before its loop starts.
May import: the supervisor side, doctor, status, envreport, typer and click; never the agent, the forkserver or the
store.

This __init__ stays empty: the forkserver, warm workers and training scripts import the package.
"""
