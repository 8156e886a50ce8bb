"""Test configuration: markers. Shared graphs and paths live in ``tests/graphs.py`` (one
definition each), so tests land on a few standard buckets and the schedule loop and the BRKGA
scan compile once per bucket across files (JAX caches compilations per shape)."""

from __future__ import annotations


def pytest_configure(config):
    config.addinivalue_line("markers", "subprocess: starts Python subprocesses (slower; "
                                       "`-m 'not subprocess'` leaves them out)")
