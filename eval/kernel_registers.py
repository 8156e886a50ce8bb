"""The fused kernels' registers and spills per thread, and the occupancy they allow, without a GPU.

The kernels are latency-bound, so how many chromosomes an SM holds at once (registers decide
it: 65,536 per SM) sets their throughput as much as the length of a step does. This lowers
the kernels for CUDA on the CPU (the Triton IR Pallas emits, at each lane width), compiles that
IR for an H100 (``sm_90a``) with the ``triton`` package and reads ``ptxas -v``: registers per
thread, spill stores and loads; per-SM programs follow (at most 32 blocks and 64 warps, per-warp
registers allocated in units of 256)::

    pip install 'gsched[kernel-tools]'   # triton: compiler and ptxas, no GPU needed
    python -m eval.kernel_registers --size 500 --devices 2 --warps 1,2,4
    python -m eval.kernel_registers --kernels priority,fifo --ttir-dir /tmp/ttir

Kernels: ``list``, ``priority``, ``fifo`` (the register kernels of those schedulers),
``list_memory`` (the list scheduler's kernel with its lanes in memory,
:mod:`gsched.costmodel.pallas_memory`), ``list_fused`` (that kernel accounting SPEC §3's
memory as it schedules, :mod:`gsched.costmodel.pallas_peaks`), ``list_lanes`` (the list
scheduler's kernel with one chromosome per lane, :mod:`gsched.costmodel.pallas_lanes`),
``list_lanes_fused`` (that one accounting SPEC §3's memory too), ``priority_lanes`` and
``fifo_lanes`` (§8.2's schedulers with one chromosome per lane,
:mod:`gsched.costmodel.pallas_lanes_dynamic`) and ``priority_lanes_fused`` /
``fifo_lanes_fused`` (those accounting SPEC §3's memory too).

The ``triton`` package is not the Triton inside XLA that compiles the kernels on a GPU (its
version and passes differ): the numbers are indicative, for comparing variants of the kernels,
not the registers a GPU run uses. Without ``triton`` only the IR is written (``--ttir-dir``).
Lowering hooks Pallas' private Triton lowering (``lower_jaxpr_to_triton_module``).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from gsched.core.padding import bucket_for, pad_graph, pad_keys
from gsched.costmodel.pallas_decode import KERNEL_CHUNK
from gsched.costmodel.pallas_dynamic import fused_schedule, fused_schedule_and_memory
from gsched.costmodel.pallas_lexmin import lowers as lexmin_lowers
from gsched.costmodel.params import CostParams
from gsched.costmodel.schedule import decode_placement
from gsched.generators import random_computation_graph
from gsched.harness.benchmarks import parse_int_list, publish_section, section_header
from gsched.infra.progress import log

REGISTERS_PER_SM, MAX_BLOCKS_PER_SM, MAX_WARPS_PER_SM, SMS_H100 = 65536, 32, 64, 132


KERNELS = {"list": ("list", "registers"), "list_memory": ("list", "memory"),
           "list_lanes": ("list", "lanes"), "list_fused": ("list", "memory_fused"),
           "list_lanes_fused": ("list", "lanes_fused"), "priority": ("priority", "registers"),
           "fifo": ("fifo", "registers"), "priority_lanes": ("priority", "lanes"),
           "fifo_lanes": ("fifo", "lanes"), "priority_lanes_fused": ("priority", "lanes_fused"),
           "fifo_lanes_fused": ("fifo", "lanes_fused")}
PER_LANE = tuple(kernel for kernel in KERNELS if "lanes" in kernel)  # a chromosome per thread


def triton_modules(size: int, num_devices: int, kernel: str, chunk: int
                   ) -> list[tuple[int, str]]:
    """``(lane width, Triton IR text)`` of each width of ``kernel`` (:data:`KERNELS`) a
    population of ``random_computation_graph(size, 0)`` compiles (widest first), lowered for
    CUDA."""
    scheduler, state = KERNELS[kernel]
    from jax._src.pallas.triton import pallas_call_registration as registration

    graph = random_computation_graph(size, 0)
    bucket = bucket_for(graph)
    padded = jax.tree.map(jnp.asarray, pad_graph(graph, bucket))
    keys = jnp.asarray(pad_keys(np.random.default_rng(0).random(
        (2, graph.chromosome_length(num_devices)), np.float32), graph, bucket, num_devices))
    params = jax.tree.map(jnp.asarray, CostParams(latency=0.1, bandwidth=16384.0))
    modules, lower = [], registration.lowering.lower_jaxpr_to_triton_module

    def capture(jaxpr, grid_mapping, *args, **kwargs):
        result = lower(jaxpr, grid_mapping, *args, **kwargs)
        text = result.module.operation.get_asm(enable_debug_info=False)
        # The width: the steps of the kernel's first output, the slot taken at each step
        # (``[width]``; ``[width, P]`` for the kernel with a chromosome per lane).
        first = jaxpr.invars[grid_mapping.num_index_operands + grid_mapping.num_inputs].aval
        modules.append((first.shape[0], text))
        return result

    def one(c):
        placement = decode_placement(padded, c, num_devices)
        if state.endswith("_fused"):  # the kernel at that state, accounting SPEC §3
            return fused_schedule_and_memory(padded, c, placement, params, num_devices,
                                             scheduler, chunk, interpret=False,
                                             state=state.removesuffix("_fused"))
        return fused_schedule(padded, c, placement, params, num_devices, scheduler, chunk,
                              interpret=False, state=state)

    def population(k):
        return jax.vmap(one)(k)

    lexmin_lowers()  # its probe kernel, lowered once per process, is not one of these
    registration.lowering.lower_jaxpr_to_triton_module = capture
    try:
        jax.jit(population).trace(keys).lower(lowering_platforms=("cuda",))
    finally:
        registration.lowering.lower_jaxpr_to_triton_module = lower
    return sorted(modules, reverse=True)


def ptxas_report(ttir: str, num_warps: int, capability: int = 90) -> dict[str, int]:
    """Compiles Triton IR text with the ``triton`` package for ``sm_{capability}a`` and returns
    ``ptxas -v``'s ``registers``, ``spill_stores``, ``spill_loads`` (bytes) and ``stack``."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import get_ptxas

    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp, "kernel.ttir")
        source.write_text(ttir)
        kernel = triton.compile(str(source), target=GPUTarget("cuda", capability, 32),
                                options={"num_warps": num_warps,
                                         "enable_fp_fusion": False})  # integer kernels
        ptx = Path(tmp, "kernel.ptx")
        ptx.write_text(kernel.asm["ptx"])
        suffix = "a" if capability >= 90 else ""
        done = subprocess.run([get_ptxas(capability).path, "-v", "--regAllocOptLevel=2",
                               f"--gpu-name=sm_{capability}{suffix}", str(ptx), "-o",
                               os.devnull], capture_output=True, text=True, check=True)
    text = done.stderr + done.stdout

    def number(pattern: str) -> int:
        found = re.search(pattern, text)
        if found is None:
            raise RuntimeError(f"ptxas -v printed no {pattern!r}:\n{text}")
        return int(found.group(1))

    return {"registers": number(r"Used (\d+) registers"),
            "spill_stores": number(r"(\d+) bytes spill stores"),
            "spill_loads": number(r"(\d+) bytes spill loads"),
            "stack": number(r"(\d+) bytes stack frame")}


def programs_per_sm(registers: int, num_warps: int) -> int:
    """Programs (thread blocks of ``num_warps`` warps) an H100 SM holds at ``registers`` per
    thread: per-warp registers are allocated in units of 256."""
    per_warp = math.ceil(registers * 32 / 256) * 256
    return min(MAX_BLOCKS_PER_SM, MAX_WARPS_PER_SM // num_warps,
               REGISTERS_PER_SM // (per_warp * num_warps))


def main(argv: Sequence[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(prog="python -m eval.kernel_registers",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=500, help="ops of random_computation_graph")
    p.add_argument("--devices", type=int, default=2)
    p.add_argument("--kernels", default=",".join(KERNELS), help="comma-separated, of "
                   + ", ".join(KERNELS))
    p.add_argument("--chunk", type=int, default=KERNEL_CHUNK)
    p.add_argument("--warps", type=parse_int_list, default=(1, 2, 4))
    p.add_argument("--ttir-dir", type=Path, default=None, help="also write the Triton IR here")
    p.add_argument("--output", type=Path, default=None, help="Markdown file for the section")
    p.add_argument("--section-title", default="Fused-kernel registers (no GPU)")
    args = p.parse_args(argv)
    try:
        import triton
    except ImportError:
        triton = None
        if args.ttir_dir is None:
            raise SystemExit("the optional 'triton' package is missing (pip install "
                             "'gsched[kernel-tools]'); give --ttir-dir to write the IR only")
    rows = ["| kernel | lanes | warps | registers | spills (B stored / loaded) | "
            "programs per SM | chromosomes in flight, 132 SMs |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    per_lane = [kernel for kernel in args.kernels.split(",") if kernel in PER_LANE]
    for kernel in args.kernels.split(","):
        modules = triton_modules(args.size, args.devices, kernel, args.chunk)
        for width, text in modules:
            if args.ttir_dir is not None:
                args.ttir_dir.mkdir(parents=True, exist_ok=True)
                path = args.ttir_dir / f"{kernel}_{args.size}_{args.devices}_{width}.ttir"
                path.write_text(text)
                log(f"[registers] wrote {path}")
            if triton is None:
                continue
            for warps in args.warps:
                report = ptxas_report(text, warps)
                programs = programs_per_sm(report["registers"], warps)
                chromosomes = programs * SMS_H100 * (32 * warps if kernel in PER_LANE else 1)
                rows.append(f"| {kernel} | {width:,} | {warps} | {report['registers']} | "
                            f"{report['spill_stores']} / {report['spill_loads']} | {programs} | "
                            f"{chromosomes:,} |")
                log(f"[registers] {kernel}, {width} lanes, {warps} warps: "
                    f"{report['registers']} registers, spills {report['spill_stores']} / "
                    f"{report['spill_loads']} B, {programs} programs per SM")
    if triton is None:
        return
    body = "\n".join([
        *section_header("eval.kernel_registers", argv), "",
        f"The fused kernels of `random_computation_graph({args.size}, 0)`, D = {args.devices}, "
        f"chunk {args.chunk}, lowered for CUDA on the CPU and compiled for sm_90a with the "
        f"`triton` package {triton.__version__} (not XLA's own Triton: indicative, for "
        f"comparing variants); registers per thread from `ptxas -v`; programs per SM from "
        f"65,536 registers, 32 blocks, 64 warps per SM; one chromosome per program"
        + (" (" + ", ".join(f"`{k}`" for k in per_lane) + ": one per thread)."
           if per_lane else "."),
        "", *rows, ""])
    publish_section(args.output, args.section_title, body, "registers")


if __name__ == "__main__":
    main()
