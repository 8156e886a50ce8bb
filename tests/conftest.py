"""Test configuration: markers, and compiled executables released after every test module
(see the fixture). Shared graphs and paths live in ``tests/graphs.py``, one definition each."""

from __future__ import annotations

import importlib.util
import os

# Before JAX starts its backend: XLA:CPU without LLVM's optimizations. Compiling is most of
# the suite's time and this makes it ~40 % faster (docs/benchmarks.md, "The tests compile
# without LLVM's optimizations"); the programs compute the same (no fast math either way),
# only slower to run, which the tests' small graphs do not notice.
TEST_XLA_FLAG = "--xla_backend_optimization_level=0"
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {TEST_XLA_FLAG}".strip()

import pytest  # noqa: E402

from gsched.methods import release_compiled  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "subprocess: starts Python subprocesses (slower; "
                                       "`-m 'not subprocess'` leaves them out)")


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_executables():
    """Each XLA:CPU executable holds ~1,000 memory mappings and Linux allows 65,530 per
    process: the whole suite in one process crashed inside XLA's compiler (segfault / abort,
    seen in a CI dry run). Executables are dropped after every test module."""
    yield
    release_compiled()


@pytest.fixture(autouse=True)
def _release_compiled_executables_if_crowded():
    """And after any test that leaves the mappings past half the cap: one module compiling
    every decoder at several buckets (tests/test_pallas_memory.py) crashed XLA's compiler
    the same way before its module ended."""
    yield
    release_compiled(only_if_crowded=True)


@pytest.fixture(scope="module")
def gpu_programs():
    """The programs behind the GPU fixtures (tests/data/gpu_hlo/make_fixtures.py)."""
    from tests.graphs import GPU_HLO

    spec = importlib.util.spec_from_file_location("make_fixtures", GPU_HLO / "make_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
