"""The TPU list kernel (and the loop) compiled by the TPU compiler ahead of time, without a TPU.

:mod:`gsched.costmodel.pallas_tpu` is checked bit for bit against the loop in Pallas'
interpreter by the tests, and its Pallas → Mosaic lowering too; whether Mosaic and XLA:TPU
accept it (layouts, scalar memory, the loops) only a TPU compiler says. libtpu, the optional
``jax[tpu]``, compiles for a described TPU topology without one (``jax.experimental.
topologies``), so this compiles the kernel and its prologue (placement →
``pallas_schedule_and_memory(state="tpu")``, vmapped over a population: what decoder
``"pallas_tpu"`` runs) for each chip, size and device count, and reports whether it compiled,
in how long, and whether that agrees with the SMEM check the call makes on a TPU
(:func:`~gsched.costmodel.pallas_tpu.check_smem`). ``--decoders loop`` compiles the loop
decoder's whole evaluation instead, for each of ``--schedulers``: what "auto" runs on a TPU::

    pip install 'jax[tpu]==<the installed jax>'   # libtpu; no TPU needed
    JAX_PLATFORMS=cpu python -m eval.tpu_compile --chips v5e,v6e,v4 --sizes 100,500,2000
    JAX_PLATFORMS=cpu python -m eval.tpu_compile --decoders loop --schedulers list,priority

Nothing is run: a compiled kernel is not a timed one.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from gsched.core.padding import bucket_for, pad_graph, pad_keys
from gsched.costmodel.evaluate import evaluate_with_decoder
from gsched.costmodel.pallas_decode import (
    KERNEL_CHUNK,
    pallas_schedule_and_memory,
    slot_bound,
    tpu_smem_words,
)
from gsched.costmodel.pallas_tpu import fits_smem
from gsched.costmodel.params import CostParams
from gsched.costmodel.schedule import decode_placement
from gsched.generators import random_computation_graph
from gsched.harness.benchmarks import parse_int_list, publish_section, section_header
from gsched.infra.progress import log

TOPOLOGIES = {"v4": "v4:2x2x1", "v5e": "v5e:2x2", "v5p": "v5p:2x2x1", "v6e": "v6e:2x2"}


def population_fn(size: int, num_devices: int, population: int, chunk: int,
                  decoder: str = "pallas_tpu", scheduler: str = "list"):
    """``(jitted function of the keys, keys' shape, the padded graph)`` for a population of
    ``random_computation_graph(size, 0)``: ``"pallas_tpu"``, placement and the kernel
    compiled, not interpreted; ``"loop"`` / ``"dense"``, that decoder's whole evaluation
    (``evaluate_with_decoder``) with ``scheduler``."""
    graph = random_computation_graph(size, 0)
    bucket = bucket_for(graph)
    padded = jax.tree.map(jnp.asarray, pad_graph(graph, bucket))
    keys = pad_keys(np.random.default_rng(0).random(
        (population, graph.chromosome_length(num_devices)), np.float32), graph, bucket,
        num_devices)
    params = jax.tree.map(jnp.asarray, CostParams(latency=0.1, bandwidth=16384.0))

    def one(k):
        return pallas_schedule_and_memory(padded, k, decode_placement(padded, k, num_devices),
                                          params, num_devices, chunk, interpret=False,
                                          state="tpu")

    def whole(k):
        return evaluate_with_decoder(padded, k, params, num_devices=num_devices,
                                     decoder=decoder, scheduler=scheduler)

    fn = jax.vmap(one) if decoder == "pallas_tpu" else whole
    return jax.jit(fn), keys.shape, padded


def compile_for(chip: str, size: int, num_devices: int, population: int, chunk: int,
                decoder: str = "pallas_tpu", scheduler: str = "list") -> dict:
    """Compiles :func:`population_fn` for ``chip``'s first core: ``{compiled, seconds, error,
    words, capacity, fits, vp}`` (``words``: :func:`~gsched.costmodel.pallas_decode.
    tpu_smem_words`; ``fits``: the SMEM check a TPU call makes)."""
    from jax.experimental import topologies
    from jax.experimental.pallas import tpu as pltpu

    device = topologies.get_topology_desc(TOPOLOGIES[chip], "tpu").devices[0]
    capacity = pltpu.get_tpu_info_for_chip(pltpu.ChipVersion(chip), 1).smem_capacity_bytes
    fn, shape, padded = population_fn(size, num_devices, population, chunk, decoder, scheduler)
    bucket = padded.bucket
    vp = slot_bound(bucket.num_ops, bucket.num_tensors, bucket.num_edges, num_devices)
    words = tpu_smem_words(padded, num_devices, chunk)
    sharding = jax.sharding.SingleDeviceSharding(device)
    start = time.perf_counter()
    try:
        fn.trace(jax.ShapeDtypeStruct(shape, jnp.float32, sharding=sharding)).lower().compile()
        compiled, error = True, ""
    except Exception as e:  # noqa: BLE001 (the compiler's verdict is the result)
        compiled, error = False, str(e).strip().splitlines()[0][:160]
    return {"compiled": compiled, "seconds": time.perf_counter() - start, "error": error,
            "words": words, "capacity": capacity, "fits": fits_smem(words, capacity), "vp": vp}


def main(argv: Sequence[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(prog="python -m eval.tpu_compile",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--chips", default="v5e,v6e,v4", help="comma-separated, of "
                   + ", ".join(TOPOLOGIES))
    p.add_argument("--sizes", type=parse_int_list, default=(100, 500, 2000))
    p.add_argument("--devices", type=parse_int_list, default=(1, 2, 4))
    p.add_argument("--population", type=int, default=256)
    p.add_argument("--chunk", type=int, default=KERNEL_CHUNK)
    p.add_argument("--decoders", default="pallas_tpu",
                   help="comma-separated: pallas_tpu (the kernel), loop, dense (whole "
                        "evaluations; the loop is what \"auto\" runs on a TPU)")
    p.add_argument("--schedulers", default="list",
                   help="comma-separated, for the loop: list, priority, fifo")
    p.add_argument("--output", default=None, help="Markdown file for the section")
    p.add_argument("--section-title", default="Compiled for a TPU ahead of time (no TPU)")
    args = p.parse_args(argv)
    try:
        import libtpu  # noqa: F401
    except ImportError:
        raise SystemExit("the optional libtpu is missing: pip install 'jax[tpu]==" +
                         jax.__version__ + "'") from None
    rows = ["| chip | ops | D | decoder | scheduler | slots V_p | SMEM words (of capacity) | "
            "SMEM check | compiled | seconds |", "| --- " * 10 + "|"]
    disagree = 0
    for chip in args.chips.split(","):
        for size in args.sizes:
            for d in args.devices:
                for decoder in args.decoders.split(","):
                    for scheduler in (args.schedulers.split(",") if decoder == "loop"
                                      else ["list"]):
                        r = compile_for(chip, size, d, args.population, args.chunk, decoder,
                                        scheduler)
                        kernel = decoder == "pallas_tpu"
                        disagree += kernel and r["fits"] and not r["compiled"]
                        verdict = "yes" if r["compiled"] else f"no: {r['error']}"
                        smem = (f"{r['words']:,} ({4 * r['words'] / r['capacity']:.0%}) | "
                                f"{'fits' if r['fits'] else 'refused'}") if kernel else "— | —"
                        rows.append(f"| {chip} | {size:,} | {d} | {decoder} | {scheduler} | "
                                    f"{r['vp']:,} | {smem} | {verdict} | {r['seconds']:.1f} |")
                        log(f"[tpu] {chip}, {size} ops, D = {d}, {decoder}, {scheduler}: "
                            f"{verdict} ({r['seconds']:.1f} s)")
    body = "\n".join([
        *section_header("eval.tpu_compile", argv), "",
        f"`random_computation_graph(size, 0)`, a population of {args.population}, compiled by "
        f"libtpu for the chip's first core with no TPU attached; nothing ran: compiled, not "
        f"timed. `pallas_tpu`: placement and the TPU list kernel with its memory accounting "
        f"(chunk {args.chunk}); `loop` / `dense`: those decoders' whole evaluations. SMEM "
        f"check (the kernel): what a call on a TPU checks before compiling (inputs and "
        f"outputs double-buffered, ≤ 90 % of the chip's SMEM; refused calls raise); compiled "
        f"anyway here, so the compiler's verdict shows how tight the check is. Kernel cases "
        f"the check passes that fail to compile: {disagree}.",
        "", *rows, ""])
    publish_section(None if args.output is None else Path(args.output), args.section_title,
                    body, "tpu")


if __name__ == "__main__":
    main()
