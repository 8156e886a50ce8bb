"""The results table of a sweep: tidy JSON lines, one per :data:`IDENTITY`.

A sweep folder holds ``results.jsonl`` (one process) or ``results.p{i}.jsonl`` (process ``i``
of several, ``jax.distributed``); readers merge every ``results*.jsonl``. Files are read with
:func:`gsched.infra.progress.read_jsonl`: a cut-off last line (a sweep killed mid-write) is
dropped with a warning, any other bad line is an error. Rows that the current config no
longer produces move to ``stale.jsonl`` (:func:`compact`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from gsched.infra.progress import read_jsonl

IDENTITY = ("dataset", "graph", "objective", "devices", "method", "seed", "budget")
RESULTS = "results.jsonl"
STALE = "stale.jsonl"


def identity(row: dict) -> tuple:
    """A row's identity columns, in :data:`IDENTITY` order."""
    return tuple(row[k] for k in IDENTITY)


def process_file(index: int, count: int) -> str:
    """The results file that process ``index`` of ``count`` writes."""
    return RESULTS if count == 1 else f"results.p{index}.jsonl"


def result_files(out: str | os.PathLike) -> list[Path]:
    """The results files of a sweep folder (one per process), or ``[out]`` for a file."""
    out = Path(out)
    if out.is_dir():
        return sorted(out.glob("results*.jsonl"))
    return [out]


def read_rows(out: str | os.PathLike, warn: Callable[[str], None] | None = None
              ) -> list[dict]:
    """All rows of a sweep folder or results file; a partial last line (killed mid-write) is
    dropped with ``warn``; a row repeated by a re-run batch is kept once (the last)."""
    rows: dict[tuple, dict] = {}
    for path in result_files(out):
        for row in read_jsonl(path, warn=warn):
            missing = [k for k in IDENTITY if k not in row]
            if missing:
                raise ValueError(f"{path}: a row lacks {', '.join(missing)}: {row}")
            rows[identity(row)] = row
    return list(rows.values())


def format_rows(rows: Iterable[dict]) -> str:
    """``rows`` as JSON lines."""
    return "".join(json.dumps(r) + "\n" for r in rows)


def compact(path: Path, keep: Callable[[dict], bool],
            warn: Callable[[str], None] | None = None) -> int:
    """Rewrites ``path`` with the rows ``keep`` accepts, once each (atomically); the others
    are appended to ``stale.jsonl`` beside it. Returns how many moved."""
    if not path.exists():
        return 0
    rows = list({identity(r): r for r in read_jsonl(path, warn=warn)}.values())
    kept = [r for r in rows if keep(r)]
    stale = [r for r in rows if not keep(r)]
    if stale:
        with open(path.parent / STALE, "a") as f:
            f.write(format_rows(stale))
    tmp = path.with_suffix(".tmp")
    tmp.write_text(format_rows(kept))
    os.replace(tmp, path)
    return len(stale)
