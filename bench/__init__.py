"""Benchmarks: ``./run bench`` (``python -m bench``) prints figures; tests assert behaviour only."""
