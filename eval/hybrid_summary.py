"""The hybrid's comparison with both parents, from a sweep's results table:

    python -m eval.hybrid_summary runs/hybrid/sweep/results.jsonl

Per dataset and entry (method label, budget): the mean % gap from a reference (approx_dp_10k
where the dataset has it, else the best value any entry found), the mean % improvement over
BRKGA 5K, the share of graphs where the entry is ≤ / < BRKGA 5K, and the mean wall seconds
per graph (compilation excluded). One seed: a graph's value is its single run.
"""

import collections
import json
import sys


def main(path: str) -> None:
    rows = [json.loads(line) for line in open(path)]
    data = collections.defaultdict(dict)  # (dataset, entry) -> graph -> row
    for r in rows:
        data[(r["dataset"], (r["method"], r["budget"]))][r["graph"]] = r
    for dataset in sorted({d for d, _ in data}):
        entries = sorted(e for d, e in data if d == dataset)
        graphs = sorted(set.intersection(*(set(data[(dataset, e)]) for e in entries)))
        value = {e: {g: data[(dataset, e)][g]["value"] for g in graphs} for e in entries}
        dp = ("approx_dp_10k", 5000)
        ref_name = "approx DP K = 10,000" if dp in value else "best value found"
        ref = value[dp] if dp in value else {g: min(v[g] for v in value.values()) for g in graphs}
        brkga = value[("brkga", 5000)]
        print(f"\n### {dataset} ({len(graphs)} graphs, peak memory, D = 1)\n")
        print(f"| method | budget | gap from {ref_name} % | vs BRKGA 5K % | ≤ BRKGA 5K | "
              "< BRKGA 5K | wall s / graph |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for e in entries:
            v = value[e]
            gap = sum(100 * (v[g] - ref[g]) / ref[g] for g in graphs) / len(graphs)
            imp = sum(100 * (brkga[g] - v[g]) / brkga[g] for g in graphs) / len(graphs)
            le = sum(v[g] <= brkga[g] for g in graphs) / len(graphs)
            lt = sum(v[g] < brkga[g] for g in graphs) / len(graphs)
            wall = sum(data[(dataset, e)][g]["wall_seconds"] for g in graphs) / len(graphs)
            print(f"| {e[0]} | {e[1]} | {gap:.2f} | {imp:+.2f} | {100 * le:.0f} % | "
                  f"{100 * lt:.0f} % | {wall:.3g} |")


if __name__ == "__main__":
    main(sys.argv[1])
