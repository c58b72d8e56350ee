"""The test suite as a package, so test modules, conftest files and scripts/chaos.py import the shared helpers as
`tests.helpers` (and `tests.chaos.chaos_scenarios`) with no sys.path changes: pytest puts the repository root on
sys.path (the first folder above the tests without an __init__.py), `python -m scripts.chaos` run from the root does
too.

The files the tests start as processes (fake_trainer.py, chaos/*_trainer.py, chaos/faulty_example.py, real/*.py)
are scripts, not modules of this package: they import nothing from it."""
