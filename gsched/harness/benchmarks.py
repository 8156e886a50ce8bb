"""What the benchmarks share: their sections of ``docs/benchmarks.md``, the machine they ran on,
and the bit-for-bit comparison of two decoders' results (:func:`mismatches`).

A benchmark writes one Markdown section per machine and backend (:func:`write_section`
replaces the section with the same title and keeps the others, so CPU and GPU results
recorded on different machines live side by side), headed by :func:`section_header` (date,
:func:`machine_description`, the command).
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import shlex
from collections.abc import Sequence
from pathlib import Path

import jax
import numpy as np

from gsched.infra.progress import log

DEFAULT_OUTPUT = Path("docs/benchmarks.md")
FILE_HEADER = ("# Benchmarks\n\nCost-model throughput, written by `make bench` "
               "(`python -m eval.bench_cost_model`); one section per machine/backend.\n\n")


def parse_int_list(text: str) -> tuple[int, ...]:
    """``"100, 500,2000"`` → ``(100, 500, 2000)`` (``""``: none)."""
    return tuple(int(x) for x in text.replace(" ", "").split(",") if x)


def package_version(package: str) -> str:
    """The installed version of ``package``, or ``"unknown"``."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``, else ``platform.processor()``), or ``""``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or ""


def machine_description() -> list[str]:
    """Markdown list items: OS, CPU and cores, JAX and its devices, Python, load average."""
    cpu = cpu_model()
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    uname = platform.uname()
    devices = jax.devices()
    kinds = sorted({d.device_kind for d in devices})
    lines = [
        f"- Machine: {uname.system} {uname.release} {uname.machine}; CPU: {cpu or 'unknown'}; "
        f"{os.cpu_count()} logical CPUs ({usable} usable)",
        f"- JAX {jax.__version__} (jaxlib {package_version('jaxlib')}), backend "
        f"`{jax.default_backend()}`: {len(devices)} device(s) {devices} ({', '.join(kinds)})",
        f"- Python {platform.python_version()}",
    ]
    if hasattr(os, "getloadavg"):
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        lines.append(f"- Load average at start (1/5/15 min): {load} — timings are noisy when "
                     "other processes share the machine")
    return lines


def section_header(module: str, argv: Sequence[str]) -> list[str]:
    """The first lines of a section: the date (UTC), the machine and the command
    ``python -m module argv...``."""
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return [f"- Date: {date}", *machine_description(),
            f"- Command: `{shlex.join(['python', '-m', module, *argv])}`"]


def write_section(path: Path, title: str, body: str) -> None:
    """Writes ``## title`` + body into ``path``: replaces the section with that title (up to the
    next ``#``/``##`` heading outside code fences) or appends it; other sections are kept."""
    heading = f"## {title}"
    text = path.read_text() if path.exists() else FILE_HEADER
    lines = text.splitlines()
    start = end = None
    fenced = False
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        if start is None and line.rstrip() == heading:
            start = i
        elif start is not None and (line.startswith("## ") or line.startswith("# ")):
            end = i
            break
    section = [heading, ""] + body.rstrip("\n").splitlines() + [""]
    if start is None:
        while lines and not lines[-1].strip():
            lines.pop()
        lines = lines + [""] + section
    else:
        lines = lines[:start] + section + lines[end if end is not None else len(lines):]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines).rstrip("\n") + "\n")


def publish_section(path: Path | None, title: str, body: str, tag: str) -> None:
    """:func:`write_section` into ``path`` (logged with ``[tag]``), or the body to stdout when
    no path is given."""
    if path is None:
        print(body)
        return
    write_section(path, title, body)
    log(f"[{tag}] wrote section {title!r} to {path}")


def mismatches(want, got) -> list[str]:
    """Fields of two results (NamedTuples of arrays, possibly nested: Evaluations, Schedules)
    that differ (floats compared bit for bit, None only where None), with the first differing
    chromosome (index along the leading axis): how the decoders are checked against each
    other."""
    bad = []
    for field in want._fields:
        x, y = getattr(want, field), getattr(got, field)
        if (x is None) != (y is None):
            bad.append(f"{field}: None on one side")
            continue
        if x is None:
            continue
        if hasattr(x, "_fields"):  # a nested result (a DynamicSchedule's Schedule)
            bad += [f"{field}.{line}" for line in mismatches(x, y)]
            continue
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape or x.dtype != y.dtype:
            bad.append(f"{field}: {x.shape} {x.dtype} vs {y.shape} {y.dtype}")
            continue
        if x.dtype.kind == "f":
            x, y = x.view(np.int32), y.view(np.int32)
        rows = np.nonzero((x != y).reshape(x.shape[0] if x.ndim else 1, -1).any(axis=1))[0]
        if rows.size:
            bad.append(f"{field}: {rows.size} chromosomes differ, first {rows[0]}")
    return bad
