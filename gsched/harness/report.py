"""The SPEC §7 report of a sweep's results table (REGAL Tables 1-2, Figs. 4-5).

:func:`tables` computes, for every (dataset, objective, devices) *section* and every (method,
budget) *entry*:

* **Table 1** — mean % improvement over the reference entry (``100 (o_ref − o) / o_ref``,
  default BRKGA at 5000 evaluations), mean % gap from the best known value
  (``100 (o − o_best) / o_best``, ``o_best`` the best value any entry of the section found for
  the graph, any seed), both as arithmetic means and as geometric means of the ratios
  (``100 (1 − G(o / o_ref))`` and ``100 (G(o / o_best) − 1)``, ``G`` the geometric mean), and
  the fraction of graphs where the entry matches or beats the reference (``o ≤ o_ref``) and
  the fraction of its solutions within the capacity (``feasible``);
* **Table 2** — wall time per graph (the per-graph share of its batch, compilation excluded):
  arithmetic and geometric means, and the mean evaluations used.

A graph's value for an entry is its mean over the seeds run (``value`` is the objective
itself: the peak, or the makespan). Infeasible solutions (over the capacity) are left out of
the improvement and gap means, which average over the graphs where the entry — and for the
improvement the reference — is feasible; the best known value is the best *feasible* one; an
infeasible entry never matches or beats the reference, a feasible one beats an infeasible
reference. :func:`markdown` writes both tables; :func:`plot` (needs matplotlib, imported only
there: ``pip install -e .[eval]``) draws ``fig4_improvement_hist.png`` (histogram of %
improvement per entry, REGAL Fig. 4) and ``fig5_eval_limit.png`` (mean of ``o / o_ref``
against the evaluation limit, log x, REGAL Fig. 5; a method run at one budget only, e.g. a
heuristic, is a dashed level line), both over the graphs where the solutions compared are
feasible. :func:`report` does all three for a results folder or file.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

import numpy as np

from gsched.harness.results import read_rows
from gsched.infra.progress import log

Section = tuple  # (dataset, objective, devices)
Entry = tuple  # (method, budget)


class EntryStats(NamedTuple):
    """Table 1 and 2 numbers of one entry in one section (NaN where undefined)."""
    graphs: int  # graphs compared with the reference
    improvement_mean: float  # % over the reference, arithmetic mean
    improvement_geo: float  # % from the geometric mean of o / o_ref
    gap_mean: float  # % from best known, arithmetic mean (all the entry's graphs)
    gap_geo: float  # % from the geometric mean of o / o_best
    match_or_beat: float  # fraction of graphs with o ≤ o_ref
    feasible: float  # fraction of the entry's rows within the capacity
    wall_mean: float  # seconds per graph
    wall_geo: float
    evals_mean: float


def parse_reference(text: str) -> Entry:
    """``"METHOD:BUDGET"`` → ``(method, budget)``."""
    method, sep, budget = text.rpartition(":")
    if not sep or not method or not budget.isdigit() or int(budget) < 1:
        raise ValueError(f"--reference must be METHOD:BUDGET (e.g. brkga:5000), got {text!r}")
    return method, int(budget)


def _geo(ratios: np.ndarray) -> float:
    return float(np.exp(np.mean(np.log(ratios)))) if ratios.size else math.nan


def _mean(x: np.ndarray) -> float:
    return float(np.mean(x)) if x.size else math.nan


def per_graph(rows: list[dict], field: str) -> dict[Section, dict[Entry, dict[str, float]]]:
    """``field`` per section, entry and graph, averaged over seeds."""
    values: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for r in rows:
        value = r[field]
        if field == "value" and not (math.isfinite(value) and value > 0):
            raise ValueError(f"{r['method']} on {r['graph']} ({r['objective']}): value "
                             f"{value!r} — % metrics need positive finite values")
        values[(r["dataset"], r["objective"], r["devices"])][(r["method"], r["budget"])][
            r["graph"]].append(value)
    return {s: {e: {g: float(np.mean(v)) for g, v in graphs.items()}
                for e, graphs in entries.items()} for s, entries in values.items()}


def best_known(rows: list[dict]) -> dict[Section, dict[str, float]]:
    """The best feasible value any entry and seed found, per section and graph."""
    best: dict = defaultdict(dict)
    for r in rows:
        if not r["feasible"]:
            continue
        s = (r["dataset"], r["objective"], r["devices"])
        best[s][r["graph"]] = min(best[s].get(r["graph"], math.inf), r["value"])
    return best


def entry_stats(values: dict[str, float], reference: dict[str, float] | None,
                best: dict[str, float], walls: dict[str, float], evals: dict[str, float],
                feasible: dict[str, float], ref_feasible: dict[str, float] | None
                ) -> EntryStats:
    """Table 1-2 numbers of one entry (``values`` per graph) in one section.

    A graph counts as feasible for an entry when every seed's solution was. Improvement and
    gap average over graphs where the entry (and the reference) are feasible; an infeasible
    entry never matches or beats the reference, a feasible one always beats an infeasible
    reference."""
    reference, ref_feasible = reference or {}, ref_feasible or {}
    shared = sorted(set(values) & set(reference))
    ok = {g: feasible[g] == 1.0 for g in values}
    both = [g for g in shared if ok[g] and ref_feasible[g] == 1.0]
    o, ref = (np.array([values[g] for g in both]), np.array([reference[g] for g in both]))
    beats = [ok[g] and (ref_feasible[g] < 1.0 or values[g] <= reference[g]) for g in shared]
    mine = sorted(values)
    to_best = np.array([values[g] / best[g] for g in mine if ok[g] and g in best])
    wall = np.array([walls[g] for g in mine])
    return EntryStats(
        graphs=len(shared),
        improvement_mean=_mean(100 * (ref - o) / ref),
        improvement_geo=100 * (1 - _geo(o / ref)),
        gap_mean=_mean(100 * (to_best - 1)),
        gap_geo=100 * (_geo(to_best) - 1),
        match_or_beat=_mean(np.array(beats, float)),
        feasible=_mean(np.array([feasible[g] for g in mine])),
        wall_mean=_mean(wall),
        wall_geo=_geo(np.maximum(wall, 1e-12)),
        evals_mean=_mean(np.array([evals[g] for g in mine])),
    )


def tables(rows: list[dict], reference: Entry
           ) -> dict[Section, dict[Entry, EntryStats]]:
    """:class:`EntryStats` of every entry, per section (entries sorted by method, budget)."""
    if not rows:
        raise ValueError("no results rows")
    values, walls = per_graph(rows, "value"), per_graph(rows, "wall_seconds")
    evals, best = per_graph(rows, "evals_used"), best_known(rows)
    feasible = per_graph(rows, "feasible")
    return {s: {e: entry_stats(values[s][e], values[s].get(reference), best[s], walls[s][e],
                               evals[s][e], feasible[s][e], feasible[s].get(reference))
                for e in sorted(values[s])}
            for s in sorted(values)}


def _fmt(x: float, spec: str = ".2f") -> str:
    return "—" if math.isnan(x) else format(x, spec)


def _percent(fraction: float) -> str:
    return "—" if math.isnan(fraction) else f"{100 * fraction:.0f} %"


def markdown(stats: dict[Section, dict[Entry, EntryStats]], reference: Entry,
             plots: list[str]) -> str:
    """``report.md``: Tables 1 and 2 of every section, then the plots (file names)."""
    ref = f"{reference[0]} {reference[1]}"
    out = ["# Evaluation report", "",
           f"Reference: **{ref}** evaluations. Improvement = `100 (o_ref − o) / o_ref`; gap = "
           "`100 (o − o_best) / o_best` with `o_best` the best value any method found; "
           "geometric columns use the geometric mean of the ratios `o / o_ref` and "
           "`o / o_best` (SPEC §7). A graph's value is its mean over seeds. Improvement and gap "
           "average over graphs where the solutions compared are feasible (within the "
           "capacity); `graphs` counts those shared with the reference; `o_best` is the best "
           "feasible value; an infeasible solution never matches or beats the reference.", ""]
    for (dataset, objective, devices), entries in stats.items():
        out += [f"## {dataset} — {objective}, D = {devices}", "",
                f"### Table 1: quality against {ref}", "",
                "| method | budget | graphs | improvement % (mean) | improvement % (geo) | "
                "gap from best % (mean) | gap from best % (geo) | matches or beats ref | "
                "feasible |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for (method, budget), s in entries.items():
            out.append(f"| {method} | {budget} | {s.graphs} | {_fmt(s.improvement_mean)} | "
                       f"{_fmt(s.improvement_geo)} | {_fmt(s.gap_mean)} | {_fmt(s.gap_geo)} | "
                       f"{_percent(s.match_or_beat)} | {_percent(s.feasible)} |")
        if reference not in entries:
            out += ["", f"(no {ref} rows in this section: improvement columns are empty)"]
        out += ["", "### Table 2: wall time per graph (compilation excluded)", "",
                "| method | budget | seconds (mean) | seconds (geo) | evaluations (mean) |",
                "|---|---:|---:|---:|---:|"]
        for (method, budget), s in entries.items():
            out.append(f"| {method} | {budget} | {s.wall_mean:.4g} | {s.wall_geo:.4g} | "
                       f"{s.evals_mean:.0f} |")
        out.append("")
    out += [f"![{p}]({p})" for p in plots] or [
        "Plots need matplotlib: `pip install -e .[eval]`."]
    return "\n".join(out) + "\n"


def plot(rows: list[dict], reference: Entry, out: Path) -> list[str]:
    """Writes Fig. 4 and Fig. 5 as PNG; returns their file names (none without matplotlib)."""
    try:
        import matplotlib
    except ImportError:
        return []
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    values, feasible = per_graph(rows, "value"), per_graph(rows, "feasible")
    sections = sorted(values)
    fig4, axes4 = plt.subplots(len(sections), 1, figsize=(7, 3.2 * len(sections)),
                               squeeze=False)
    fig5, axes5 = plt.subplots(len(sections), 1, figsize=(7, 3.2 * len(sections)),
                               squeeze=False)
    for (ax4,), (ax5,), section in zip(axes4, axes5, sections):
        title = f"{section[0]} — {section[1]}, D = {section[2]}"
        ref = values[section].get(reference, {})
        ok = {e: {g for g, f in per.items() if f == 1.0} for e, per in feasible[section].items()}
        ratios = {entry: np.array([per[g] / ref[g] for g in
                                   sorted(set(per) & set(ref) & ok[entry] & ok[reference])])
                  for entry, per in sorted(values[section].items())} if ref else {}
        ratios = {entry: r for entry, r in ratios.items() if r.size}
        improvements = {e: 100 * (1 - r) for e, r in ratios.items() if e != reference}
        if improvements:  # shared bins, so the entries' histograms compare
            bins = np.histogram_bin_edges(np.concatenate(list(improvements.values())), 20)
            for (method, budget), x in improvements.items():
                ax4.hist(x, bins=bins, histtype="step", label=f"{method} {budget}")
        curves = defaultdict(list)
        colors = iter(plt.rcParams["axes.prop_cycle"].by_key()["color"][::-1] * 4)
        for (method, budget), r in ratios.items():
            curves[method].append((budget, float(r.mean())))
        ax4.set(title=title, xlabel=f"% improvement over {reference[0]} {reference[1]}",
                ylabel="graphs")
        for method, points in curves.items():  # one budget (a heuristic): a level line
            budgets, means = zip(*sorted(points))
            if len(points) > 1:
                ax5.plot(budgets, means, marker="o", label=method)
            else:
                ax5.axhline(means[0], linestyle="--", linewidth=1,
                            label=f"{method} ({budgets[0]} evals)", color=next(colors))
        ax5.set_xscale("log")
        ax5.set(title=title, xlabel="evaluation limit",
                ylabel=f"mean value / {reference[0]} {reference[1]}")
        for ax in (ax4, ax5):
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize="small")
    names = ["fig4_improvement_hist.png", "fig5_eval_limit.png"]
    for fig, name in zip((fig4, fig5), names):
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
    return names


def report(results: str | Path, out: str | Path, reference: Entry = ("brkga", 5000)) -> Path:
    """Writes ``report.md`` (and the plots, with matplotlib) into ``out``; returns its path."""
    rows = read_rows(results, log)
    stats = tables(rows, reference)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plots = plot(rows, reference, out)
    if not plots:
        log("plots skipped: they need matplotlib (pip install -e .[eval])")
    path = out / "report.md"
    path.write_text(markdown(stats, reference, plots))
    return path
