"""Process resources that long runs exhaust: memory mappings held by compiled executables.

On XLA:CPU every compiled executable keeps its JIT-compiled code in many memory mappings
(measured here: a BRKGA search over one bucket holds ~1,000; the test module of BRKGA alone
went from ~600 to ~10,000). Linux caps a process at ``vm.max_map_count`` mappings (65,530 by
default); past it, the next compilation dies with a segmentation fault or an abort inside
XLA. JAX keeps every executable alive in its caches, so a process that compiles many distinct
computations (a test suite, a sweep over many buckets, methods and device counts) must drop
them from time to time: :func:`release_if_crowded` does when the count nears the cap.
"""

from __future__ import annotations

from pathlib import Path

import jax

_MAPS = Path("/proc/self/maps")
_LIMIT = Path("/proc/sys/vm/max_map_count")


def mapped_regions() -> int:
    """Memory mappings of this process (0 where ``/proc`` does not say, e.g. macOS)."""
    try:
        with _MAPS.open("rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def map_limit() -> int | None:
    """The per-process mapping cap (``vm.max_map_count``), or ``None`` where unknown."""
    try:
        return int(_LIMIT.read_text())
    except (OSError, ValueError):
        return None


def release_compiled(*caches) -> None:
    """Drops JAX's compiled executables and the given ``functools`` caches that hold some;
    later calls compile again."""
    for cache in caches:
        cache.cache_clear()
    jax.clear_caches()


def release_if_crowded(*caches, fraction: float = 0.5) -> bool:
    """:func:`release_compiled` when the mappings exceed ``fraction`` of the cap; returns
    whether it did."""
    limit = map_limit()
    if limit is None or mapped_regions() <= fraction * limit:
        return False
    release_compiled(*caches)
    return True
