"""Pictures of a schedule (issue #12 §4): memory over the schedule, and a Gantt chart.

Everything here works on the plain-Python result dicts of
:func:`gsched.costmodel.host.evaluate_graph` / ``python -m gsched evaluate`` /
``python -m gsched optimize`` (``placement``, ``order``, optionally ``fusion``, and ``start`` /
``end`` for the dynamic schedulers of SPEC §8.2).

* :func:`memory_timeline` — SPEC §3's usage at every step of a result's ``order``, recomputed
  in NumPy float64 from the graph, the order, the placement and (SPEC §8.3) the fusion roots.
  It needs no matplotlib.
* :func:`plot_memory`, :func:`plot_gantt`, :func:`plot` — matplotlib drawings (the optional
  ``eval`` extra: ``pip install gsched[eval]``). matplotlib is imported only inside these
  functions, and only through :class:`matplotlib.figure.Figure` with an Agg canvas: no pyplot,
  no global backend switch, nothing of the caller's matplotlib state is changed.
* :func:`plot_command` — the ``plot`` command: graph file + result JSON files → PNG.

Decisions:

* The memory plot's x axis is the **step index** in ``order`` (also for results that carry
  ``start`` / ``end``): SPEC §3's walk is order-based, and results with different transfers
  have different numbers of steps but are still comparable step by step. A device's curve has
  a point at each step that runs on that device (a transfer ``X(t, d)`` counts on ``d``).
* The Gantt chart draws the **first** result only, one row per (device, stream): the compute
  stream (ops / fused kernels) and the copy-in stream (transfers ``X(t, d)`` into ``d``).
  Zero-length items are drawn as a tick. Bars are labelled with the op name (a fused kernel:
  its root's name and ``+k`` for ``k`` fused ops; a transfer: ``→name``) when the label fits.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from gsched.core.graph import Graph

__all__ = ["memory_timeline", "plot", "plot_command", "plot_gantt", "plot_memory"]

KINDS = ("auto", "memory", "gantt")
_GANTT_ERROR = ("a Gantt chart needs start/end times: evaluate with --scheduler priority or "
                "fifo")


# ----------------------------------------------------------------------------------------------
# Memory timeline (no matplotlib)
# ----------------------------------------------------------------------------------------------

def _item(raw, step: int) -> tuple:
    """``["op", j]`` / ``["xfer", t, d]`` (list or tuple) → a tuple of Python ints."""
    try:
        kind = raw[0]
        if kind == "op" and len(raw) == 2:
            return ("op", int(raw[1]))
        if kind == "xfer" and len(raw) == 3:
            return ("xfer", int(raw[1]), int(raw[2]))
    except (TypeError, ValueError, IndexError, KeyError):
        pass
    raise ValueError(f"order step {step} is {raw!r}; expected ['op', j] or ['xfer', t, d]")


def _roots(graph: Graph, result: dict, placement: np.ndarray) -> np.ndarray:
    """The fusion root of every op (identity when the result has no ``fusion``), validated."""
    n = graph.num_ops
    fusion = result.get("fusion")
    if fusion is None:
        return np.arange(n, dtype=np.int64)
    roots = np.asarray(fusion)
    if roots.shape != (n,) or (roots.size and not np.issubdtype(roots.dtype, np.integer)):
        raise ValueError(f"result's fusion has shape {roots.shape}, expected a root op for each "
                         f"of the graph's {n} ops")
    roots = roots.astype(np.int64)
    bad = np.flatnonzero((roots < 0) | (roots >= n))
    if bad.size:
        raise ValueError(f"result's fusion gives op {int(bad[0])} the missing root op "
                         f"{int(roots[bad[0]])} (graph has {n} ops)")
    bad = np.flatnonzero(roots[roots] != roots)
    if bad.size:
        j = int(bad[0])
        raise ValueError(f"result's fusion gives op {j} the root {int(roots[j])}, which is not "
                         "its own root")
    bad = np.flatnonzero(placement != placement[roots])
    if bad.size:
        j = int(bad[0])
        raise ValueError(f"result's fusion puts op {j} (device {int(placement[j])}) in the group "
                         f"of op {int(roots[j])} (device {int(placement[roots[j]])})")
    return roots


def _placement(graph: Graph, result: dict, num_devices: int) -> np.ndarray:
    n = graph.num_ops
    if "placement" not in result or "order" not in result:
        raise ValueError("result has no placement/order (expected an evaluate or optimize "
                         "result)")
    placement = np.asarray(result["placement"])
    if placement.shape != (n,) or (placement.size and
                                   not np.issubdtype(placement.dtype, np.integer)):
        raise ValueError(f"result's placement has shape {placement.shape}, expected a device "
                         f"for each of the graph's {n} ops (result of another graph?)")
    placement = placement.astype(np.int64)
    bad = np.flatnonzero((placement < 0) | (placement >= num_devices))
    if bad.size:
        raise ValueError(f"result places op {int(bad[0])} on device {int(placement[bad[0]])}, "
                         f"outside [0, {num_devices})")
    return placement


def memory_timeline(graph: Graph, result: dict, num_devices: int) -> np.ndarray:
    """SPEC §3 memory usage at every step of ``result["order"]``, on the step's device.

    Returns ``[D, steps]`` float64: entry ``[d, i]`` is the usage that step ``i`` counts toward
    device ``d``'s peak (``live_d`` + the step's new tensors + temporary memory), NaN where step
    ``i`` runs on another device. So ``np.nanmax(timeline, axis=1)`` is the device peaks
    (a device with no step gets NaN there; its peak is 0).

    With ``result["fusion"]`` (SPEC §8.3, the root op of every op) the graph is contracted:
    a step ``["op", r]`` is the kernel of ``r``'s group, whose temporary memory is the sum over
    the group, whose new tensors are ``r``'s outputs and whose inputs are the tensors the group
    reads from outside; tensors produced and read inside a group are never allocated. Without
    ``fusion`` every op is its own group.

    Raises ``ValueError`` if the result does not fit the graph: wrong placement / fusion
    length, an order step naming a missing op, tensor or device, an op that is not a kernel
    root, an item listed twice or missing, or a step that reads a tensor not resident on its
    device (an order that is not a schedule of this graph).
    """
    num_devices = int(num_devices)
    if num_devices < 1:
        raise ValueError(f"number of devices must be >= 1, got {num_devices}")
    n, t_count = graph.num_ops, graph.num_tensors
    placement = _placement(graph, result, num_devices)
    roots = _roots(graph, result, placement)
    producer = graph.tensor_producer
    size = graph.tensor_size.astype(np.float64)

    # Contraction (SPEC §8.3): kernel inputs/outputs/temp, kept tensors and their consumers.
    kernels = np.flatnonzero(roots == np.arange(n))
    is_kernel = np.zeros(n, bool)
    is_kernel[kernels] = True
    temp = np.bincount(roots, weights=graph.temporary_memory, minlength=n)
    outputs: list[list[int]] = [[] for _ in range(n)]
    kernel_inputs: list[set[int]] = [set() for _ in range(n)]
    consumers: list[set[int]] = [set() for _ in range(t_count)]
    internal = np.zeros(t_count, bool)
    for t, c in zip(graph.edge_tensor.tolist(), graph.edge_consumer.tolist()):
        k, kp = int(roots[c]), int(roots[producer[t]])
        if k == kp:
            internal[t] = True
        else:
            kernel_inputs[k].add(t)
            consumers[t].add(k)
    for t in range(t_count):
        kp = int(roots[producer[t]])
        if internal[t] and consumers[t]:
            raise ValueError(f"result's fusion is not an in-tree: tensor {t} is read inside and "
                             f"outside the group of op {kp}")
        if not internal[t]:
            if producer[t] != kp:
                raise ValueError(f"result's fusion is not an in-tree: tensor {t} of op "
                                 f"{int(producer[t])} leaves the group of op {kp}")
            outputs[kp].append(t)

    # Parse and check the order.
    items = [_item(raw, i) for i, raw in enumerate(result["order"])]
    seen: set[tuple] = set()
    xfers_of: dict[int, int] = {}
    for i, item in enumerate(items):
        if item in seen:
            raise ValueError(f"order step {i} repeats {list(item)}")
        seen.add(item)
        if item[0] == "op":
            j = item[1]
            if not 0 <= j < n:
                raise ValueError(f"order step {i} names missing op {j} (graph has {n} ops)")
            if not is_kernel[j]:
                raise ValueError(f"order step {i} runs op {j}, which is fused into the kernel of "
                                 f"op {int(roots[j])}")
        else:
            _, t, d = item
            if not 0 <= t < t_count:
                raise ValueError(f"order step {i} transfers missing tensor {t} (graph has "
                                 f"{t_count} tensors)")
            if not 0 <= d < num_devices:
                raise ValueError(f"order step {i} transfers tensor {t} to device {d}, outside "
                                 f"[0, {num_devices})")
            if internal[t]:
                raise ValueError(f"order step {i} transfers tensor {t}, internal to the fused "
                                 f"kernel of op {int(roots[producer[t]])}")
            if d == placement[producer[t]]:
                raise ValueError(f"order step {i} transfers tensor {t} to its producer's "
                                 f"device {d}")
            xfers_of[t] = xfers_of.get(t, 0) + 1
    missing = [int(k) for k in kernels if ("op", int(k)) not in seen]
    if missing:
        raise ValueError(f"order misses op {missing[0]} ({len(missing)} ops missing; result of "
                         "another graph?)")

    def readers(t: int, d: int) -> int:
        count = sum(1 for k in consumers[t] if placement[k] == d)
        if d == placement[producer[t]]:
            count += xfers_of.get(t, 0)
        return count

    # SPEC §3 walk. live[d] is kept as a running float64 sum, reset to 0 when d empties.
    resident: list[dict[int, int]] = [{} for _ in range(num_devices)]  # t -> pending readers
    live = np.zeros(num_devices, np.float64)
    out = np.full((num_devices, len(items)), np.nan, np.float64)

    def make_resident(t: int, d: int) -> None:
        resident[d][t] = readers(t, d)
        live[d] += size[t]

    def read(t: int, d: int, i: int) -> None:
        if t not in resident[d]:
            raise ValueError(f"order step {i} reads tensor {t} on device {d} before it is "
                             "there (order is not a schedule of this graph)")
        resident[d][t] -= 1

    def free(d: int) -> None:
        done = [t for t, left in resident[d].items() if left <= 0]
        for t in done:
            del resident[d][t]
            live[d] -= size[t]
        if not resident[d]:
            live[d] = 0.0

    for i, item in enumerate(items):
        if item[0] == "op":
            k = item[1]
            d = int(placement[k])
            for t in kernel_inputs[k]:
                if t not in resident[d]:
                    read(t, d, i)  # raises
            out[d, i] = live[d] + sum(size[t] for t in outputs[k]) + temp[k]
            for t in outputs[k]:
                make_resident(t, d)
            for t in kernel_inputs[k]:
                read(t, d, i)
            free(d)
        else:
            _, t, d = item
            s = int(placement[producer[t]])
            if t not in resident[s]:
                read(t, s, i)  # raises
            if t in resident[d]:
                raise ValueError(f"order step {i} transfers tensor {t} to device {d} twice")
            out[d, i] = live[d] + size[t]
            make_resident(t, d)
            read(t, s, i)
            free(s)
            free(d)
    return out


# ----------------------------------------------------------------------------------------------
# matplotlib helpers
# ----------------------------------------------------------------------------------------------

def _matplotlib():
    try:
        import matplotlib  # noqa: F401
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:  # pragma: no cover - the eval extra is installed in tests
        raise ImportError("plotting schedules needs matplotlib: pip install gsched[eval]"
                          ) from err
    return Figure, FigureCanvasAgg


def _new_figure(width: float, height: float):
    Figure, FigureCanvasAgg = _matplotlib()
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _bytes(x: float) -> str:
    """``1536`` → ``"1.5 KiB"``."""
    if not math.isfinite(x):
        return str(x)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(x) < 1024 or unit == "TiB":
            return f"{x:.0f} {unit}" if unit == "B" else f"{x:.3g} {unit}"
        x /= 1024
    return f"{x:.3g} TiB"  # pragma: no cover


def _has_times(result: dict) -> bool:
    return result.get("start") is not None and result.get("end") is not None


def _as_axes_list(ax, count: int, what: str) -> list:
    if isinstance(ax, (Sequence, np.ndarray)):
        axes = list(np.ravel(np.asarray(ax, dtype=object)))
        if len(axes) != count:
            raise ValueError(f"{what} needs {count} axes (one per device), got {len(axes)}")
        return axes
    return [ax] * count


def _labels(results: list[dict], labels) -> list[str]:
    if labels is None:
        return [f"result {i}" for i in range(len(results))]
    labels = [str(x) for x in labels]
    if len(labels) != len(results):
        raise ValueError(f"got {len(labels)} labels for {len(results)} results")
    return labels


def plot_memory(graph: Graph, results: list[dict], labels: list[str] | None, num_devices: int,
                ax=None):
    """Memory usage over the schedule, per device, several results overlaid.

    x is the step index in each result's ``order`` (not time, even when ``start`` is given);
    y is the SPEC §3 usage of :func:`memory_timeline` at the steps that run on the device,
    drawn as a step function that holds a step's usage until the device's next step.
    Each result's legend entry is its label with its peak on that device (a dotted line marks
    the peak).

    Args:
      graph: the graph the results belong to.
      results: result dicts (``placement``, ``order``, optional ``fusion``).
      labels: one label per result (``None``: ``"result i"``).
      num_devices: ``D``.
      ax: ``None`` (a new figure with one subplot row per device), a sequence of ``D`` axes,
        or a single axes (every device drawn in it, labels naming the device when ``D > 1``).

    Returns the matplotlib ``Figure``.
    """
    results = list(results)
    if not results:
        raise ValueError("plot_memory needs at least one result")
    labels = _labels(results, labels)
    timelines = [memory_timeline(graph, r, num_devices) for r in results]
    if ax is None:
        fig = _new_figure(9, 1.0 + 2.2 * num_devices)
        axes = list(np.ravel(fig.subplots(num_devices, 1, sharex=True, squeeze=False)))
    else:
        _matplotlib()
        axes = _as_axes_list(ax, num_devices, "plot_memory")
        fig = axes[0].figure
    shared = len({id(a) for a in axes}) == 1 and num_devices > 1
    for d, a in enumerate(axes):
        for i, (tl, label) in enumerate(zip(timelines, labels)):
            steps = np.flatnonzero(~np.isnan(tl[d]))
            peak = float(tl[d, steps].max()) if steps.size else 0.0
            name = f"{label} (device {d})" if shared else label
            color = f"C{(i + d * len(results)) % 10}" if shared else f"C{i % 10}"
            a.plot(steps, tl[d, steps], drawstyle="steps-post", marker=".", markersize=3,
                   linewidth=1.2, color=color, label=f"{name}: peak {_bytes(peak)}")
            if steps.size:
                a.axhline(peak, color=color, linestyle=":", linewidth=0.8)
        if not shared:
            a.set_ylabel(f"device {d}\nmemory")
    from matplotlib.ticker import FuncFormatter

    for a in {id(a): a for a in axes}.values():
        if shared:
            a.set_ylabel("memory")
        a.yaxis.set_major_formatter(FuncFormatter(lambda y, _: _bytes(y)))
        a.legend(loc="upper left", fontsize="small")
        a.grid(True, alpha=0.3)
    axes[-1].set_xlabel("schedule step")
    if ax is None:
        axes[0].set_title(f"memory over the schedule{': ' + graph.name if graph.name else ''}")
    return fig


def _kernel_label(graph: Graph, item: tuple, fused: np.ndarray) -> str:
    if item[0] == "op":
        j = item[1]
        extra = int(fused[j]) - 1
        return graph.op_names[j] + (f" +{extra}" if extra > 0 else "")
    _, t, _ = item
    return "→" + graph.op_names[int(graph.tensor_producer[t])]


def plot_gantt(graph: Graph, result: dict, num_devices: int, ax=None):
    """Gantt chart of a result with ``start`` / ``end`` times (SPEC §8.2 schedulers).

    One row per (device, stream): ``dev d compute`` (ops and fused kernels on ``d``) and
    ``dev d copy-in`` (transfers ``X(t, d)`` into ``d``). Bars are labelled with op names
    (``graph.op_names``; a fused kernel ``root +k``; a transfer ``→producer``) when they fit;
    zero-length items are drawn as ticks.

    Raises ``ValueError`` if the result has no ``start`` / ``end`` (the list scheduler reports
    none). Returns the matplotlib ``Figure``.
    """
    if not _has_times(result):
        raise ValueError(_GANTT_ERROR)
    num_devices = int(num_devices)
    placement = _placement(graph, result, num_devices)
    roots = _roots(graph, result, placement)
    items = [_item(raw, i) for i, raw in enumerate(result["order"])]
    start = np.asarray(result["start"], np.float64)
    end = np.asarray(result["end"], np.float64)
    if start.shape != (len(items),) or end.shape != (len(items),):
        raise ValueError(f"result has {start.size} start and {end.size} end times for "
                         f"{len(items)} order steps")
    fused = np.bincount(roots, minlength=graph.num_ops)
    if ax is None:
        fig = _new_figure(11, 1.2 + 0.7 * 2 * num_devices)
        ax = fig.add_subplot(1, 1, 1)
    else:
        _matplotlib()
        fig = ax.figure
    rows = [(d, s) for d in range(num_devices) for s in ("compute", "copy-in")]
    row_of = {r: i for i, r in enumerate(rows)}
    span = float(end.max()) if end.size else 1.0
    span = span if span > 0 else 1.0
    # Label fitting: data units per character, from the axes' width in points.
    width_pt = fig.get_figwidth() * 72 * ax.get_position().width
    fontsize = 7
    per_char = span * 0.62 * fontsize / max(width_pt, 1.0)
    bars: dict[tuple[int, str], list[tuple[float, float]]] = {r: [] for r in rows}
    ticks: dict[tuple[int, str], list[float]] = {r: [] for r in rows}
    for i, item in enumerate(items):
        if item[0] == "op":
            if not 0 <= item[1] < graph.num_ops:
                raise ValueError(f"order step {i} names missing op {item[1]} (graph has "
                                 f"{graph.num_ops} ops)")
            row = (int(placement[item[1]]), "compute")
        else:
            if not (0 <= item[1] < graph.num_tensors and 0 <= item[2] < num_devices):
                raise ValueError(f"order step {i} is {list(item)}: missing tensor or device")
            row = (item[2], "copy-in")
        s, e = float(start[i]), float(end[i])
        if e > s:
            bars[row].append((s, e - s))
            label = _kernel_label(graph, item, fused)
            if (e - s) >= per_char * (len(label) + 1):
                ax.text(s + (e - s) / 2, row_of[row], label, ha="center", va="center",
                        fontsize=fontsize, clip_on=True)
        else:
            ticks[row].append(s)
    for row, i in row_of.items():
        color = f"C{row[0] % 10}"
        if bars[row]:
            ax.broken_barh(bars[row], (i - 0.35, 0.7), facecolors=color,
                           alpha=0.55 if row[1] == "compute" else 0.3,
                           edgecolor="black", linewidth=0.4)
        if ticks[row]:
            ax.plot(ticks[row], [i] * len(ticks[row]), linestyle="none", marker="|",
                    markersize=10, color=color)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"dev {d} {s}" for d, s in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, span * 1.01)
    ax.set_xlabel("time")
    runtime = result.get("runtime")
    ax.set_title("schedule" + (f" (runtime {float(runtime):.6g})" if runtime is not None
                              else ""))
    ax.grid(True, axis="x", alpha=0.3)
    return fig


def plot(graph: Graph, results: list[dict], labels: list[str] | None, num_devices: int,
         out: str | os.PathLike, kind: str = "auto") -> Path:
    """Writes a PNG of ``results`` to ``out`` and returns its path.

    ``kind``: ``"memory"`` (:func:`plot_memory` of every result), ``"gantt"``
    (:func:`plot_gantt` of the first result; needs ``start`` / ``end``) or ``"auto"`` (the
    memory plot, plus a Gantt panel under it when the first result has ``start`` / ``end``).
    The file is PNG whatever ``out``'s extension.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown plot kind {kind!r}; expected one of {', '.join(KINDS)}")
    results = list(results)
    if not results:
        raise ValueError("plot needs at least one result")
    num_devices = int(num_devices)
    if num_devices < 1:
        raise ValueError(f"number of devices must be >= 1, got {num_devices}")
    gantt = kind == "gantt" or (kind == "auto" and _has_times(results[0]))
    memory = kind in ("memory", "auto")
    if gantt and not _has_times(results[0]):
        raise ValueError(_GANTT_ERROR)
    out = Path(out)
    if memory and gantt:
        gantt_h = 0.7 * 2 * num_devices + 0.8
        mem_h = 2.2 * num_devices
        fig = _new_figure(11, 1.2 + mem_h + gantt_h)
        grid = fig.add_gridspec(num_devices + 1, 1,
                                height_ratios=[2.2] * num_devices + [gantt_h], hspace=0.45)
        first = fig.add_subplot(grid[0])
        mem_axes = [first] + [fig.add_subplot(grid[d], sharex=first)
                              for d in range(1, num_devices)]
        plot_memory(graph, results, labels, num_devices, ax=mem_axes)
        mem_axes[0].set_title(f"memory over the schedule"
                              f"{': ' + graph.name if graph.name else ''}")
        plot_gantt(graph, results[0], num_devices, ax=fig.add_subplot(grid[num_devices]))
    elif memory:
        fig = plot_memory(graph, results, labels, num_devices)
    else:
        fig = plot_gantt(graph, results[0], num_devices)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png", bbox_inches="tight")
    return out


# ----------------------------------------------------------------------------------------------
# The plot command
# ----------------------------------------------------------------------------------------------

def _load_result(path: Path) -> tuple[dict, bool]:
    """A result file → (result dict, whether it was an optimize batch's ``results[0]``)."""
    if not path.is_file():
        raise ValueError(f"result file {path} does not exist")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"cannot read result file {path}: {err}") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"result file {path} is not JSON: {err}") from None
    batch = False
    if isinstance(data, dict) and "order" not in data and "results" in data:
        rows = data["results"]
        if not isinstance(rows, list) or not rows or not isinstance(rows[0], dict):
            raise ValueError(f"result file {path}: 'results' must be a non-empty list of "
                             "result objects")
        data, batch = rows[0], True
    if not isinstance(data, dict) or "order" not in data or "placement" not in data:
        raise ValueError(f"result file {path} holds no result: expected an evaluate or "
                         "optimize JSON object with 'placement' and 'order'")
    if not isinstance(data["order"], list) or not isinstance(data["placement"], list):
        raise ValueError(  # noqa: TRY004 - bad file content, reported like every input error
            f"result file {path}: 'placement' and 'order' must be lists")
    return data, batch


def _devices_used(result: dict) -> int:
    used = max((int(p) for p in result["placement"]), default=0) + 1
    for raw in result["order"]:
        if isinstance(raw, (list, tuple)) and len(raw) == 3 and raw[0] == "xfer":
            try:
                used = max(used, int(raw[2]) + 1)
            except (TypeError, ValueError):
                pass
    return used


def plot_command(graph_path: str | os.PathLike, result_paths, out: str | os.PathLike,
                 labels: list[str] | None = None, num_devices: int | None = None,
                 kind: str = "auto") -> dict:
    """The ``plot`` command: draws result files of one graph into a PNG.

    Args:
      graph_path: a graph file in any format :func:`gsched.formats.load_graph` reads.
      result_paths: one path or a list of JSON files, each the output of ``python -m gsched
        evaluate`` (a result object) or of ``python -m gsched optimize`` (a single-graph
        result object, or a batch ``{"results": [...]}``, of which ``results[0]`` — the first
        graph's result — is drawn).
      out: the PNG to write.
      labels: one legend label per result file (default: the file stems).
      num_devices: ``D``; default the largest of each result's ``num_devices`` field (when the
        file has one), its largest placement + 1 and its largest transfer device + 1.
      kind: ``"auto"``, ``"memory"`` or ``"gantt"`` (see :func:`plot`).

    Returns ``{"out": path, "kind": kind, "results": number of results drawn}``. Raises
    ``ValueError`` naming the problem for a missing or unreadable file, a result that is not
    of this graph (placement length, ``num_ops``, or an order naming missing ops), a Gantt
    chart of a result without times, or a bad ``kind``.
    """
    from gsched.formats import load_graph  # the loader the CLI uses

    if kind not in KINDS:
        raise ValueError(f"unknown plot kind {kind!r}; expected one of {', '.join(KINDS)}")
    graph_path = Path(graph_path)
    if not graph_path.is_file():
        raise ValueError(f"graph file {graph_path} does not exist")
    try:
        graph = load_graph(graph_path)
    except OSError as err:
        raise ValueError(f"cannot read graph file {graph_path}: {err.strerror or err}") from None
    except ValueError as err:  # FormatError, GraphError
        raise ValueError(str(err)) from None
    if isinstance(result_paths, (str, os.PathLike)):
        result_paths = [result_paths]
    result_paths = [Path(p) for p in result_paths]
    if not result_paths:
        raise ValueError("plot needs at least one result file")
    results = []
    for path in result_paths:
        result, _ = _load_result(path)
        n = result.get("num_ops")
        if n is not None and n != graph.num_ops:
            raise ValueError(f"result file {path} is of a graph with {n} ops, but "
                             f"{graph_path} has {graph.num_ops} (mismatched graph)")
        if len(result["placement"]) != graph.num_ops:
            raise ValueError(f"result file {path} places {len(result['placement'])} ops, but "
                             f"{graph_path} has {graph.num_ops} (mismatched graph)")
        results.append(result)
    if labels is None:
        labels = [p.stem for p in result_paths]
    if num_devices is None:
        num_devices = 1
        for r in results:
            try:
                num_devices = max(num_devices, _devices_used(r), int(r.get("num_devices") or 1))
            except (TypeError, ValueError):
                raise ValueError("result placement must hold device numbers") from None
    for path, r in zip(result_paths, results):  # name the bad file
        try:
            memory_timeline(graph, r, num_devices)
        except ValueError as err:
            raise ValueError(f"result file {path} does not fit graph {graph_path}: {err}"
                             ) from None
    path = plot(graph, results, labels, num_devices, out, kind=kind)
    return {"out": str(path), "kind": kind, "results": len(results)}
