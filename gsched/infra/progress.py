"""Progress lines and JSON-lines logs for long work (training, sweeps, benchmarks).

:class:`Progress` prints one line per report (step, metrics, steps/s, elapsed, ETA, best);
:class:`MetricsLog` appends one JSON object per line and, on resume, drops the lines written
after the resumed step; :func:`read_jsonl` is the one reader of such files.
"""

from __future__ import annotations

import json
import math
import sys
import time
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
    """One line per report: ``step s/total``, metrics, steps/s, elapsed, ETA, best validation.

    ``stream=None`` prints nothing (quiet, for tests). Steps/s is measured since the previous
    report (host wall time, so it includes validation and checkpoints); ``elapsed`` starts at
    ``elapsed`` (training time of earlier sessions).
    """

    def __init__(self, total: int, *, start_step: int = 0, elapsed: float = 0.0,
                 stream: typing.TextIO | None = sys.stdout):
        self.total, self.stream = total, stream
        self._step, self._time = start_step, time.perf_counter()
        self._elapsed = elapsed

    def report(self, step: int, metrics: Mapping[str, float],
               best: tuple[float, int] | None = None) -> str:
        """Formats (and prints, unless quiet) the line for ``step``; returns it."""
        now = time.perf_counter()
        rate = (step - self._step) / max(now - self._time, 1e-9)
        self._elapsed += now - self._time
        self._step, self._time = step, now
        parts = [f"step {step}/{self.total}"]
        parts += [f"{k} {v:.4g}" for k, v in metrics.items()]
        eta = (self.total - step) / rate if rate > 0 else math.inf
        parts += [f"{rate:.3g} steps/s", f"elapsed {_clock(self._elapsed)}",
                  f"ETA {_clock(eta) if math.isfinite(eta) else '?'}"]
        if best is not None:
            parts.append(f"best {best[0]:.4g} @ {best[1]}")
        line = " | ".join(parts)
        if self.stream is not None:
            print(line, file=self.stream, flush=True)
        return line


def log(message: str) -> None:
    """One progress or status line on stderr (stdout stays for a command's result)."""
    print(message, file=sys.stderr, flush=True)


def read_jsonl(path: str | Path, *, warn: Callable[[str], None] | None = None
               ) -> list[dict[str, Any]]:
    """The objects of a JSON-lines file, in order — the one reader of every log and table.

    A last line without its newline that does not parse was cut short by a crash mid-write:
    it is dropped, with ``warn`` (if given) told so. Any other line that is not a JSON
    object raises :class:`ValueError` naming the file and line. Blank lines are skipped.
    """
    path = Path(path)
    lines = path.read_text(encoding="utf-8").split("\n")
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            if number == len(lines):                   # no newline after it: cut short
                if warn is not None:
                    warn(f"{path}: dropping a partial last line ({len(line)} characters; "
                         f"the writer was interrupted)")
                continue
            raise ValueError(f"{path}:{number}: not a JSON line ({err})") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path}:{number}: not a JSON object")
        records.append(record)
    return records


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The records of a training run's ``metrics.jsonl`` (:func:`read_jsonl`)."""
    return read_jsonl(path)


class MetricsLog:
    """Append-only JSON lines; ``resume_step=k`` first drops the lines with ``step > k``.

    A last line cut short by a crash is dropped too; any other unreadable line is an error.
    The file is rewritten (atomically) only when something is dropped.
    """

    def __init__(self, path: str | Path, *, resume_step: int | None = None):
        self.path = Path(path)
        if resume_step is not None and self.path.exists():
            records = read_jsonl(self.path)
            bad = next((r for r in records if not isinstance(r.get("step"), int)), None)
            if bad is not None:
                raise ValueError(f"{self.path}: a line has no integer 'step': {bad}")
            kept = [r for r in records if r["step"] <= resume_step]
            if kept != records or not self.path.read_text(encoding="utf-8").endswith("\n"):
                tmp = self.path.with_name(self.path.name + ".tmp")
                tmp.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
                tmp.replace(self.path)

    def write(self, record: Mapping[str, Any]) -> None:
        """Appends one object (must contain ``step``) as one line and flushes it."""
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(dict(record)) + "\n")
            f.flush()

