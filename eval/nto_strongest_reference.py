"""NTO Table 1 against the strongest reference available per graph:

    python -m eval.nto_strongest_reference docs/results/nto_large/results.jsonl \
        > docs/results/nto_large/strongest_reference.md

Per graph the reference is the lowest peak memory among the reference entries that ran on it:
approximate DP with K = 100,000 (500-node graphs only) and K = 1,000, depth-first DP (60 s),
BRKGA 5K and XLA's default scheduler (best of its candidates). Every entry's gap is
``100 (o − o_ref) / o_ref`` against that per-graph value (arithmetic and geometric mean over
the graphs); the table also says which reference entries attain it on how many graphs.
Seconds per graph are the rows' wall seconds (compilation excluded).
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict

import numpy as np

from gsched.harness.report import per_graph
from gsched.harness.results import read_rows

REFERENCES = (  # (method label, budget), strongest first in the paper's view
    ("approx_dp_100k", 5000), ("approx_dp_1000", 5000), ("dfs_dp_60s", 1),
    ("brkga", 5000), ("xla_default", 4))


def summary(rows: list[dict]) -> str:
    values, walls = per_graph(rows, "value"), per_graph(rows, "wall_seconds")
    if not all(r["feasible"] for r in rows):
        raise ValueError("every solution must be feasible (no capacity here)")
    out = ["# NTO Table 1 at CPU scale: gap from the strongest reference per graph", "",
           "Reference per graph = min over " + ", ".join(f"`{m} {b}`" for m, b in REFERENCES)
           + " (those run on the graph). Gap = `100 (o − o_ref) / o_ref`; `≤ ref` counts "
           "graphs where the entry is at or below the reference; seconds per graph exclude "
           "compilation.", ""]
    for section in sorted(values, key=lambda s: int(s[0].rsplit("_", 1)[-1])):
        entries = values[section]
        graphs = sorted(set().union(*(entries[e] for e in REFERENCES if e in entries)))
        present = [e for e in REFERENCES if e in entries]
        ref = {g: min(entries[e][g] for e in present if g in entries[e]) for g in graphs}
        attained = defaultdict(int)
        for g in graphs:
            for e in present:
                if entries[e].get(g) == ref[g]:
                    attained[e] += 1
        out += [f"## {section[0]} ({len(graphs)} graphs)", "",
                "Reference attained by: " + ", ".join(
                    f"`{m} {b}` {attained[(m, b)]}/{len(graphs)}" for m, b in present)
                + "; not run here: " + (", ".join(f"`{m} {b}`" for m, b in REFERENCES
                                                if (m, b) not in entries) or "—") + ".", "",
                "| method | budget | graphs | gap % (mean) | gap % (geo) | ≤ ref | s / graph |",
                "|---|---:|---:|---:|---:|---:|---:|"]
        for e in sorted(entries, key=lambda e: (e not in REFERENCES, e)):
            mine = [g for g in graphs if g in entries[e]]
            ratio = np.array([entries[e][g] / ref[g] for g in mine])
            wall = float(np.mean([walls[section][e][g] for g in mine]))
            geo = 100 * (math.exp(float(np.mean(np.log(ratio)))) - 1)
            out.append(f"| {e[0]} | {e[1]} | {len(mine)} | {100 * np.mean(ratio - 1):.2f} | "
                       f"{geo:.2f} | {int(np.sum(ratio <= 1))}/{len(mine)} | {wall:.4g} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(summary(read_rows(sys.argv[1])))
