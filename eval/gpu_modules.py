"""The workloads' programs as XLA GPU's modules, against the CPU modules the HLO level imports
by default (docs/importers.md, "Which compiler's module"). Per program: the seconds XLA takes
to compile it for the GPU, the ops of both modules, the GPU library calls the importer read
and the custom calls it did not (generic fallback), total flops of both modules as a multiple
of the jaxpr level's, and the libraries' workspaces (temporary memory). On a GPU machine, with
XLA's autotuning as it runs::

    python -m eval.gpu_modules --backend gpu --output docs/benchmarks.md

or for a GPU without one (JAX's CUDA plugin; the environment of eval/compile_train_step.py,
whose times are not a GPU machine's)::

    python -m eval.gpu_modules --compile-for eval/gpu_targets/h100.pbtxt
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
import warnings
from pathlib import Path
from typing import Sequence

from gsched import workloads
from gsched.harness.benchmarks import publish_section, section_header
from gsched.harness.launches import target_device
from gsched.importers import FallbackWarning, compiled_text, import_hlo_text, import_jax
from gsched.importers.hlo import (
    ATTENTION_BACKWARD,
    ATTENTION_FORWARD,
    CONV_ROLES,
    GEMM_TARGETS,
    custom_call_target,
    parse_module,
)
from gsched.infra.progress import log

TITLE = "XLA GPU's modules of the workloads against the CPU's"
ATTENTION_CALLS = ATTENTION_FORWARD | ATTENTION_BACKWARD


def library_calls(text: str) -> collections.Counter:
    """How many ENTRY custom calls of each library the module has: ``cuBLAS`` products,
    ``cuDNN`` convolutions and attention, ``other`` (cuSOLVER, top-k, ...; the fallback
    column names those the importer cannot read); and its ``call`` instructions (``call``:
    one op each, as XLA GPU's command buffers would be)."""
    module = parse_module(text)
    kinds = collections.Counter()
    for ins in module.computations[module.entry]:
        target = custom_call_target(ins)
        if target:
            kinds["cuBLAS" if target in GEMM_TARGETS else
                  "cuDNN" if target in CONV_ROLES or target in ATTENTION_CALLS else
                  "other"] += 1
        kinds["call"] += ins.opcode == "call"
    return kinds


def program_row(name: str, size: str, mode: str, device, preset: str) -> str:
    """One table row: the program compiled for ``device`` and for the CPU, both imported."""
    fn, args = workloads.program(name, size, mode)
    start = time.perf_counter()
    text = compiled_text(fn, *args, backend=device)
    seconds = time.perf_counter() - start
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FallbackWarning)
        gpu = import_hlo_text(text, device=preset, name=name)
    fallback = [str(w.message).partition(": ")[2] for w in caught
                if issubclass(w.category, FallbackWarning)]
    cpu = import_jax(fn, *args, level="hlo", device=preset)
    flops = import_jax(fn, *args, level="jaxpr", device=preset).op_flops.sum()
    calls = library_calls(text)
    workspace = gpu.temporary_memory.sum() / 2**20
    return (f"| {name} {size} {mode} | {seconds:.1f} | {cpu.num_ops:,} / {gpu.num_ops:,} | "
            f"{calls['cuBLAS']} / {calls['cuDNN']} | {calls['call']} | "
            f"{'; '.join(fallback) or '—'} | "
            f"{cpu.op_flops.sum() / flops:.2f} / {gpu.op_flops.sum() / flops:.2f} | "
            f"{workspace:,.1f} |")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m eval.gpu_modules",
                                description=__doc__.split("\n\n")[0])
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--backend", help="compile for this machine's platform (gpu, tpu)")
    target.add_argument("--compile-for", metavar="TARGET",
                        help="compile for XLA's GPU target text (eval/gpu_targets/) without "
                             "the GPU, or 'cpu'")
    p.add_argument("--names", default=",".join(workloads.WORKLOADS),
                   help="workloads (default all)")
    p.add_argument("--sizes", default="small")
    p.add_argument("--modes", default="inference,train")
    p.add_argument("--preset", default="h100", help="device preset for the costs")
    p.add_argument("--output", type=Path, help="markdown file to write the section into "
                                               "(default: print it)")
    p.add_argument("--section-title", default=None)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    device = args.backend if args.backend else target_device(args.compile_for)
    rows = []
    for name in args.names.split(","):
        for size in args.sizes.split(","):
            for mode in args.modes.split(","):
                rows.append(program_row(name, size, mode, device, args.preset))
                log(f"[gpu_modules] {rows[-1]}")
    where = f"`--backend {args.backend}`" if args.backend else \
        f"`--compile-for {args.compile_for}` (no GPU: XLA's times are this machine's)"
    body = "\n".join([
        *section_header("eval.gpu_modules", argv), "",
        f"Each program compiled for {where} and for the CPU, both imported with the "
        f"`{args.preset}` preset. *compile s*: XLA's compilation for the target (autotuning "
        "included on a GPU); *calls*: the GPU module's cuBLAS / cuDNN calls (read by the "
        "importer); *`call`s*: ENTRY `call` instructions, one op each (XLA GPU's command "
        "buffers would show here); *fallback*: custom calls counted by the generic estimate; "
        "*flops*: "
        "each module's total as a multiple of the jaxpr level's; *workspaces*: the libraries' "
        "temporary memory in the GPU module.", "",
        "| program | compile s | ops CPU / GPU | calls cuBLAS / cuDNN | `call`s | fallback | "
        "flops CPU / GPU | workspaces MiB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |", *rows])
    publish_section(args.output, args.section_title or TITLE, body, "gpu_modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
