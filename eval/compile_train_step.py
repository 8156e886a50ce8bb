"""How long GDP's or GO's PPO iteration takes to lower and compile with the kernels "auto" runs
on a GPU, compiled ahead of time: for a GPU without one (JAX's CUDA plugin and XLA's target
text, as ``eval.profile_decode --compile-for``) or for this machine's CPU (the kernels then
interpreted). Nothing runs; the data (the config's graphs and the baselines' references) is
prepared on the CPU first. Prints the seconds of each stage and the kernels "auto" chose::

    JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 JAX_PLATFORMS=cpu PYTHONPATH=.:CUDA_PLUGIN_DIR \\
      XLA_FLAGS="--xla_gpu_autotune_level=0 --xla_gpu_enable_triton_gemm=false" \\
      python -m eval.compile_train_step --config train/configs/go_full.toml \\
        --compile-for eval/gpu_targets/h100.pbtxt --lanes-from 0

``--lanes-from`` replaces ``evaluate.LANES_MIN_CHROMOSOMES`` (0: the lane kernels at every
count, what "auto" ran before session 37). Without a GPU, XLA cannot autotune the network's
matrix products for one ("Couldn't find output tile sizes"): the flags above turn that off,
so the times are not a GPU machine's, only comparable with each other.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import sys
import time
from typing import Sequence

import jax

from gsched.costmodel import evaluate, pallas_decode
from gsched.harness.launches import target_device
from gsched.infra.config import load_config
from gsched.infra.distributed import shapes_on
from gsched.infra.progress import log
from gsched.policies.go import training
from gsched.policies.go.ppo import init_state, make_train_step


@contextlib.contextmanager
def as_on_a_gpu(interpret: bool, lanes_from: int):
    """Inside: "auto" chooses the fused kernels as on a GPU (compiled by Triton unless
    ``interpret``), the lane kernels from ``lanes_from`` chromosomes per call; yields the
    counter of the kernels it chooses. Restores all and clears JAX's caches on leaving."""
    chosen = collections.Counter()
    saved = [(evaluate, name, getattr(evaluate, name)) for name in (
        "pallas_applies", "dense_applies", "_fused_decoder", "LANES_MIN_CHROMOSOMES")]
    saved.append((pallas_decode, "_interpreted", pallas_decode._interpreted))
    choose = evaluate._fused_decoder

    def spy(*args):
        kernel = choose(*args)
        chosen[kernel] += 1
        return kernel

    evaluate.pallas_applies = lambda *_: True
    evaluate.dense_applies = lambda *_, **__: False
    evaluate._fused_decoder = spy
    evaluate.LANES_MIN_CHROMOSOMES = lanes_from
    if not interpret:
        pallas_decode._interpreted = lambda flag: False if flag is None else flag
    jax.clear_caches()
    try:
        yield chosen
    finally:
        for module, name, value in saved:
            setattr(module, name, value)
        jax.clear_caches()


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m eval.compile_train_step",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--config", required=True, help="a train.gdp / train.go TOML config")
    p.add_argument("--compile-for", default="eval/gpu_targets/h100.pbtxt", metavar="cpu|TARGET",
                   help="this machine's CPU or the GPU of a GpuTargetConfigProto text")
    p.add_argument("--lanes-from", type=int, default=evaluate.LANES_MIN_CHROMOSOMES,
                   help="chromosomes per call from which 'auto' runs the lane kernels")
    p.add_argument("overrides", nargs="*", help="config overrides, key=value")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    config = load_config(args.config, training.TrainConfig, args.overrides)
    device = target_device(args.compile_for)
    t0 = time.perf_counter()
    batch, _, _, _ = training.load_data(config)  # on the CPU, before the switch below
    data_s = time.perf_counter() - t0
    net = training.initial_network(config)
    state = init_state(net, config.ppo, jax.random.key(config.seed + 1))
    batch = jax.tree.map(lambda x: x[:config.batch_size], batch)
    shapes = shapes_on((state, batch), device)
    with as_on_a_gpu(device.platform != "gpu", args.lanes_from) as chosen:
        step = make_train_step(net, config.space, config.exec_model, config.ppo,
                               training.cost_params(config.cost))
        t0 = time.perf_counter()
        lowered = step.trace(*shapes).lower()
        t1 = time.perf_counter()
        lowered.compile()
        t2 = time.perf_counter()
    kernels = ", ".join(f"{k} ×{n}" for k, n in sorted(chosen.items(), key=str))
    log(f"[compile] {args.config} for {device.device_kind}, lane kernels from "
        f"{args.lanes_from:,} chromosomes per call: data {data_s:.1f} s, lowering "
        f"{t1 - t0:.1f} s, compiling {t2 - t1:.1f} s; 'auto' chose {kernels}")


if __name__ == "__main__":
    main()
