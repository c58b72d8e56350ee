"""Project scripts; scripts/chaos.py runs as `python -m scripts.chaos` from the repository root."""
