"""Every decoder against the ready-tree loop at benchmark scale, on whatever backend JAX runs.

The unit tests check the fused Pallas kernel in Pallas' interpreter on small graphs; this runs
it compiled (Triton on a GPU, Mosaic on a TPU) on benchmark-size graphs and compares every
``Evaluation`` field bit for bit with the loop decoder, for random chromosomes, D = 1, 2, 4,
with and without fusion and program inputs, for the list scheduler and (``--schedulers``)
SPEC §8.2's event-driven ones (the dense decoders, ``pallas_memory``, ``pallas_fused`` and
``pallas_tpu`` schedule lists only)::

    python -m eval.check_decoders              # pallas decoders on a GPU or TPU; dense on a CPU
    python -m eval.check_decoders --sizes 100,500 --population 256 --decoders pallas,dense
    python -m eval.check_decoders --sizes 500 --schedulers list,priority,fifo

Exits 1 (naming the field and the first differing chromosome) if any decoder differs.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Sequence

import jax
import numpy as np

from gsched.core.padding import bucket_for, pad_graph, pad_keys
from gsched.costmodel.evaluate import (
    BACKEND_DECODERS,
    LIST_ONLY_DECODERS,
    evaluate_with_decoder,
)
from gsched.costmodel.params import CostParams
from gsched.generators import random_computation_graph
from gsched.harness.benchmarks import mismatches, parse_int_list
from gsched.infra.progress import log
from gsched.infra.resources import release_if_crowded

# Transfers, roofline kernel times, launch overhead, a capacity some chromosomes exceed.
PARAMS = CostParams(latency=0.1, bandwidth=1e3, hbm_bandwidth=3e4, launch_overhead=0.01,
                    fusion_capacity=5e4)


def check(num_ops: int, num_devices: int, fusion: bool, decoder: str, population: int,
          seed: int, scheduler: str = "list") -> list[str]:
    """One random graph (half its sources program inputs), ``population`` uniform chromosomes
    with a capacity at the median loop peak (so some are infeasible)."""
    rng = np.random.default_rng(seed)
    graph = random_computation_graph(num_ops, rng)
    sources = np.ones(graph.num_ops, bool)
    sources[graph.edge_consumer] = False
    graph = graph.replace(is_input=sources & (rng.random(graph.num_ops) < 0.5))
    bucket = bucket_for(graph)
    length = graph.chromosome_length(num_devices) + (graph.num_ops if fusion else 0)
    keys = pad_keys(rng.random((population, length)).astype(np.float32), graph, bucket,
                    num_devices)
    padded = pad_graph(graph, bucket)
    run = dict(num_devices=num_devices, fusion=fusion, scheduler=scheduler)
    loose = evaluate_with_decoder(padded, keys, PARAMS, decoder="loop", **run)
    params = PARAMS._replace(capacity=float(np.median(np.asarray(loose.peak_memory))))
    want = evaluate_with_decoder(padded, keys, params, decoder="loop", **run)
    got = evaluate_with_decoder(padded, keys, params, decoder=decoder, **run)
    return mismatches(want, got)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m eval.check_decoders",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=parse_int_list, default=(50, 500, 2000))
    p.add_argument("--devices", type=parse_int_list, default=(1, 2, 4))
    p.add_argument("--population", type=int, default=512)
    p.add_argument("--decoders", default=None,
                   help="comma-separated (default: pallas, pallas_memory, pallas_lanes, "
                        "pallas_fused and pallas_lanes_fused on a GPU, pallas_tpu and dense "
                        "on a TPU, dense elsewhere)")
    p.add_argument("--schedulers", default="list", help="comma-separated: list, priority, fifo")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    backend = jax.default_backend()
    fast = BACKEND_DECODERS.get(backend, BACKEND_DECODERS["cpu"])
    decoders = args.decoders.split(",") if args.decoders else list(fast)
    log(f"[check] backend {backend} ({jax.devices()[0].device_kind}), decoders {decoders}")
    failed = 0
    for decoder in decoders:
        for scheduler in args.schedulers.split(","):
            if decoder in LIST_ONLY_DECODERS and scheduler != "list":
                continue
            for n in args.sizes:
                for d in args.devices:
                    for fusion in (False, True):
                        t0 = time.perf_counter()
                        bad = check(n, d, fusion, decoder, args.population, seed=n * 10 + d,
                                    scheduler=scheduler)
                        failed += bool(bad)
                        release_if_crowded()  # each configuration compiles anew
                        verdict = "DIFFERS: " + "; ".join(bad) if bad else "identical"
                        log(f"[check] {decoder} vs loop, {scheduler}, {n} ops, D = {d}, fusion "
                            f"{fusion}, P = {args.population}: {verdict} "
                            f"({time.perf_counter() - t0:.1f} s)")
    log(f"[check] {failed} configuration(s) differ")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
