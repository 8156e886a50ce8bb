"""The Topoformer-seeded BRKGA against both parents, from a sweep's results table.

Per dataset and entry (method label, budget): the mean % gap from a reference (approx_dp_10k
at 5000 where the dataset has it, else the best value any entry found), the mean %
improvement over BRKGA 5K, the share of graphs where the entry is ≤ / < BRKGA 5K, and the
mean wall seconds per graph (compilation excluded), over the graphs every entry ran. One seed:
a graph's value is its single run.
"""

from __future__ import annotations

import collections

DP_REFERENCE = ("approx_dp_10k", 5000)
BRKGA_REFERENCE = ("brkga", 5000)


def parents_summary(rows: list[dict]) -> str:
    """The markdown tables, one per dataset (``docs/results/hybrid/README.md``)."""
    data = collections.defaultdict(dict)  # (dataset, entry) -> graph -> row
    for r in rows:
        data[(r["dataset"], (r["method"], r["budget"]))][r["graph"]] = r
    lines = []
    for dataset in sorted({d for d, _ in data}):
        entries = sorted(e for d, e in data if d == dataset)
        graphs = sorted(set.intersection(*(set(data[(dataset, e)]) for e in entries)))
        value = {e: {g: data[(dataset, e)][g]["value"] for g in graphs} for e in entries}
        if DP_REFERENCE in value:
            ref_name, ref = "approx DP K = 10,000", value[DP_REFERENCE]
        else:
            ref_name, ref = "best value found", {g: min(v[g] for v in value.values())
                                                 for g in graphs}
        brkga = value[BRKGA_REFERENCE]
        lines += ["", f"### {dataset} ({len(graphs)} graphs, peak memory, D = 1)", "",
                  f"| method | budget | gap from {ref_name} % | vs BRKGA 5K % | ≤ BRKGA 5K | "
                  "< BRKGA 5K | wall s / graph |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for e in entries:
            v = value[e]
            gap = sum(100 * (v[g] - ref[g]) / ref[g] for g in graphs) / len(graphs)
            imp = sum(100 * (brkga[g] - v[g]) / brkga[g] for g in graphs) / len(graphs)
            le = sum(v[g] <= brkga[g] for g in graphs) / len(graphs)
            lt = sum(v[g] < brkga[g] for g in graphs) / len(graphs)
            wall = sum(data[(dataset, e)][g]["wall_seconds"] for g in graphs) / len(graphs)
            lines.append(f"| {e[0]} | {e[1]} | {gap:.2f} | {imp:+.2f} | {100 * le:.0f} % | "
                         f"{100 * lt:.0f} % | {wall:.3g} |")
    return "\n".join(lines) + "\n" if lines else ""
