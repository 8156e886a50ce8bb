"""Cost-model throughput benchmark (``make bench``).

Measures evaluations per second of :func:`gsched.costmodel.evaluate.evaluate_population` on REGAL-style
random graphs (:func:`gsched.generators.random_computation_graph`, fixed seed) of several sizes
and device counts ``D``, with compile time reported apart from steady-state time, plus

* one row for a batch of several different graphs through :func:`evaluate_batch`;
* one row with the population split over all host devices
  (:func:`evaluate_population_sharded`; the benchmark process asks XLA for one CPU device per
  core before JAX starts, so every core runs its own schedule loop);
* a sweep of the ``chunk`` static argument and of the population size on the reference size
  (500 ops, D = 2 by default);
* the scaling check: time per evaluation divided by ``N·log₂N``, relative to the reference
  size (≈ 1 or below means growth no worse than ``N log N``);
* the decoders table: on a CPU the list schedule is decoded by :mod:`gsched.costmodel.dense`
  with ``D = 1`` up to ``dense.DENSE_MAX_OPS`` ops and by :mod:`gsched.costmodel.dense_multi`
  with ``D ≥ 2`` up to ``dense.DENSE_MULTI_MAX_OPS`` (what the main table's rows measure
  there; on a GPU the fused kernel with one chromosome per lane,
  :mod:`gsched.costmodel.pallas_lanes`, takes their place from ``LANES_MIN_CHROMOSOMES`` per
  call, the one with its lanes in memory below), and the event-driven schedulers'
  loop against what replaces it (on a CPU :mod:`gsched.costmodel.dense_dynamic`, at the
  schedulers table's population; on a GPU their kernels, :mod:`gsched.costmodel.
  pallas_dynamic` and :mod:`gsched.costmodel.pallas_lanes_dynamic`); this table times them
  next to the loop they replace (``evaluate_with_decoder``), unsharded and with one shard per
  device (the list scheduler's), the calls of each size and ``D`` interleaved so that all see
  the same machine load (``--decoder-sizes``,
  ``--decoder-devices``, ``--decoder-population``; by default at the benchmarked sizes among
  500 and 2,000 ops, ``D = 1, 2``, ``P = 512``);
* the schedulers table: SPEC §8.2's event-driven ``priority`` / ``fifo`` schedulers next to
  the list scheduler, each also with SPEC §8.3 fusion (``--schedulers``, ``--scheduler-sizes``,
  ``--no-fusion``; by default at the benchmarked sizes among 500 and 2,000 ops, every ``D``),
  with the §8.1 roofline on (``hbm_bandwidth`` below) for every mode of that table.

Results are written as a Markdown section of ``docs/benchmarks.md`` (created, or replaced if
a section with the same title exists; other sections are kept, so CPU and GPU results recorded
on different machines live side by side; :mod:`gsched.harness.benchmarks`). Run from the
repository root::

    python -m eval.bench_cost_model                      # full run on the default backend
    python -m eval.bench_cost_model --quick --output /tmp/x.md   # smoke run, < 1 minute
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from gsched.core.graph import Graph
from gsched.core.padding import PaddedGraph, batch_graphs, bucket_for, pad_graph
from gsched.costmodel.dense import DENSE_MAX_OPS, DENSE_MULTI_MAX_OPS
from gsched.costmodel.evaluate import (
    BACKEND_DECODERS,
    LANES_MIN_CHROMOSOMES,
    SMALL_SLOTS,
    evaluate_batch,
    evaluate_population,
    evaluate_population_sharded,
    evaluate_with_decoder,
)
from gsched.costmodel.pallas_decode import pallas_applies
from gsched.costmodel.params import SCHEDULERS, check_cost_params
from gsched.generators import random_computation_graph
from gsched.harness.benchmarks import (
    DEFAULT_OUTPUT,
    parse_int_list,
    section_header,
    write_section,
)
from gsched.infra import resources
from gsched.infra.distributed import one_device_per_core
from gsched.infra.progress import log

DEFAULT_SIZES = (100, 500, 2000, 10_000)
DEFAULT_DEVICES = (1, 2, 4)
DEFAULT_CHUNKS = (4, 8, 16)
DEFAULT_CHUNK = None  # evaluate_population's default: each decoder's own
REFERENCE_SIZE, REFERENCE_DEVICES = 500, 2
QUICK = dict(sizes=(20, 50), devices=(1, 2), population=16, repeats=2, chunks=(),
             sweep_populations=(), batch_graphs=2, scheduler_sizes=(50,),
             scheduler_population=16, decoder_sizes=(50,), decoder_devices=(1, 2),
             decoder_population=16)
DEFAULT_SCHEDULER_SIZES = (500, 2000)  # those of them in --sizes
DEFAULT_DECODER_SIZES = (500, 2000)  # those of them in --sizes
DEFAULT_DECODER_DEVICES = (1, 2)
DEFAULT_DECODER_POPULATION = 512
GRAPH_SEED = 0
# Transfers cost something, so D > 1 exercises the whole model: ~1.1 time units for a median
# (16 KiB) tensor, against compute costs of LogNormal(0, 1) units.
LATENCY, BANDWIDTH = 0.1, 16384.0
# The schedulers table turns the roofline on (SPEC §8.1): a median op then moves ~3 tensors of
# 16 KiB, ~1.5 time units at this HBM bandwidth, against compute costs of LogNormal(0, 1).
HBM_BANDWIDTH, LAUNCH_OVERHEAD = 32768.0, 0.01


def default_population(num_ops: int, backend: str, scheduler: str = "list") -> int:
    """Population per call: ~0.3–1 s per call on a 2-core CPU, enough parallel work on a GPU.
    The event-driven schedulers cost O(V) per started item (O(V²) per evaluation), so they get
    smaller populations (on a CPU, sized for their blocks, :mod:`gsched.costmodel.
    dense_dynamic`; the loop they replace takes 8–16× as long)."""
    if scheduler != "list":  # on a GPU, the fused kernel (~2× the list kernel's work)
        table = ((100, 256), (500, 64), (2000, 16), (math.inf, 2)) if backend == "cpu" else \
            ((100, 16384), (500, 4096), (2000, 1024), (math.inf, 128))
    else:
        table = ((100, 1024), (500, 512), (2000, 256), (math.inf, 32)) if backend == "cpu" \
            else ((100, 65536), (500, 16384), (2000, 4096), (math.inf, 512))
    return next(p for limit, p in table if num_ops <= limit)


@dataclasses.dataclass(frozen=True)
class Config:
    """One measurement: ``batch`` graphs of ``num_ops`` ops (0 = one graph through
    ``evaluate_population``), ``population`` chromosomes per graph."""

    num_ops: int
    num_devices: int
    population: int
    chunk: int | None = DEFAULT_CHUNK
    batch: int = 0
    sharded: bool = False  # population split over every device (evaluate_population_sharded)
    scheduler: str = "list"  # SPEC §2–§4, or §8.2's "priority" / "fifo"
    roofline: bool = False  # SPEC §8.1 kernel times (HBM_BANDWIDTH, LAUNCH_OVERHEAD)
    fusion: bool = False  # SPEC §8.3 (chromosomes N keys longer; uniform fusion keys)
    decoder: str = "auto"  # "loop" / "dense" / "pallas" / "pallas_memory" / "pallas_lanes" /
    #                         "pallas_fused" / "pallas_lanes_fused" / "pallas_tpu": forced
    #                         through evaluate_with_decoder

    @property
    def chunk_label(self) -> str:
        return "default" if self.chunk is None else str(self.chunk)

    @property
    def mode(self) -> str:
        return self.scheduler + (" + fusion" if self.fusion else "")

    @property
    def decoder_mode(self) -> str:
        return (self.decoder + ("" if self.scheduler == "list" else f" ({self.scheduler})")
                + (", sharded" if self.sharded else ""))

    @property
    def evaluations(self) -> int:
        return self.population * max(self.batch, 1)

    def describe(self) -> str:
        graphs = f"{self.batch}×{self.num_ops}-op graphs" if self.batch else \
            f"{self.num_ops}-op graph"
        return (f"{graphs}, D={self.num_devices}, P={self.population}"
                f"{' per graph' if self.batch else ''}, chunk={self.chunk_label}"
                f"{f', sharded over {len(jax.devices())} devices' if self.sharded else ''}"
                f"{f', {self.scheduler} scheduler' if self.scheduler != 'list' else ''}"
                f"{', roofline' if self.roofline else ''}"
                f"{', fusion' if self.fusion else ''}"
                f"{f', {self.decoder} decoder' if self.decoder != 'auto' else ''}")


@dataclasses.dataclass
class Result:
    config: Config
    bucket: tuple[int, int, int]
    first_call_s: float  # first call: trace + compile + one run
    call_times_s: list[float]  # steady-state calls
    temp_bytes: int | None  # XLA's temporary buffers of the compiled function

    @property
    def median_s(self) -> float:
        return statistics.median(self.call_times_s)

    @property
    def compile_s(self) -> float:
        return max(self.first_call_s - self.median_s, 0.0)

    @property
    def evals_per_s(self) -> float:
        return self.config.evaluations / self.median_s

    @property
    def us_per_eval(self) -> float:
        return 1e6 * self.median_s / self.config.evaluations


# ------------------------------------------------------------------------------ measuring

class _Graphs:
    """Generates and pads graphs once; device arrays are reused by every config."""

    def __init__(self):
        self._host: dict[tuple[int, int], Graph] = {}
        self._device: dict[tuple[int, int], PaddedGraph] = {}

    def graph(self, num_ops: int, seed: int) -> Graph:
        key = (num_ops, seed)
        if key not in self._host:
            self._host[key] = random_computation_graph(num_ops, seed)
        return self._host[key]

    def padded(self, num_ops: int, batch: int) -> PaddedGraph:
        key = (num_ops, batch)
        if key not in self._device:
            if batch:
                graphs = [self.graph(num_ops, GRAPH_SEED + i) for i in range(batch)]
                padded = batch_graphs(graphs, bucket_for(graphs))
            else:
                padded = pad_graph(self.graph(num_ops, GRAPH_SEED))
            self._device[key] = jax.device_put(padded)
        return self._device[key]


def _temp_bytes(fn, *args, **kwargs) -> int | None:
    """XLA's temporary-buffer size of an already compiled jit (served from jit's cache)."""
    try:
        stats = fn.lower(*args, **kwargs).compile().memory_analysis()
        return None if stats is None else int(stats.temp_size_in_bytes)
    except Exception:  # memory analysis is optional and backend-dependent
        return None


def _prepare(config: Config, graphs: _Graphs, key: jnp.ndarray):
    """``(bucket, call)``: the padded graph's bucket and a function that evaluates the config's
    population once (keys drawn from ``key``), with the function and arguments it calls."""
    padded = graphs.padded(config.num_ops, config.batch)
    bucket = padded.bucket
    shape = ((config.batch,) if config.batch else ()) + \
        (config.population, bucket.chromosome_length(config.num_devices, config.fusion))
    keys = jax.block_until_ready(jax.random.uniform(key, shape, jnp.float32))
    params = check_cost_params(LATENCY, BANDWIDTH, **(
        {"hbm_bandwidth": HBM_BANDWIDTH, "launch_overhead": LAUNCH_OVERHEAD}
        if config.roofline else {}))
    fn = evaluate_batch if config.batch else evaluate_population
    static = {"num_devices": config.num_devices, "chunk": config.chunk,
              "scheduler": config.scheduler, "fusion": config.fusion}
    if config.sharded:
        fn = evaluate_population_sharded
        static["mesh"] = jax.sharding.Mesh(np.array(jax.devices()), ("population",))
    if config.decoder != "auto":
        fn = evaluate_with_decoder
        static.update(decoder=config.decoder, batch=bool(config.batch))
    args = (padded, keys, params)
    return bucket, (lambda: jax.block_until_ready(fn(*args, **static))), (fn, args, static)


def _first_call(config: Config, call):
    start = time.perf_counter()
    out = call()
    first = time.perf_counter() - start
    runtime = np.asarray(out.runtime)
    if not np.all(np.isfinite(runtime)) or not np.all(np.asarray(out.num_steps) > 0):
        raise RuntimeError(f"cost model returned invalid results for {config.describe()}")
    return first, out


def _timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def measure(config: Config, graphs: _Graphs, repeats: int, key: jnp.ndarray) -> Result:
    """Compiles (timed: the first call) and times ``repeats`` steady-state calls after one
    warm-up call, all on the same jitted function (compiled once per bucket and config)."""
    bucket, call, (fn, args, static) = _prepare(config, graphs, key)
    first, out = _first_call(config, call)
    del out
    call()  # warm-up
    times = [_timed(call) for _ in range(repeats)]
    temp = None if config.sharded or config.decoder != "auto" else _temp_bytes(fn, *args, **static)
    return Result(config, tuple(bucket), first, times, temp)


def measure_interleaved(configs: Sequence[Config], graphs: _Graphs, repeats: int,
                        key: jnp.ndarray) -> list[Result]:
    """:func:`measure` for configs of one graph and population (same keys), their steady-state
    calls interleaved (one call of each per round), so that all see the same machine load; the
    configs' results must agree (schedule, peak memory, runtime), or this raises."""
    prepared = [_prepare(c, graphs, key) for c in configs]
    firsts, reference = [], None
    for config, (_, call, _) in zip(configs, prepared):
        first, out = _first_call(config, call)
        got = [np.asarray(x) for x in (out.order, out.peak_memory, out.runtime)]
        if reference is None:
            reference = got
        elif not all(np.array_equal(a, b) for a, b in zip(reference, got)):
            raise RuntimeError(f"{config.describe()} disagrees with {configs[0].describe()}")
        firsts.append(first)
        call()  # warm-up
    times = [[] for _ in configs]
    for _ in range(repeats):
        for row, (_, call, _) in zip(times, prepared):
            row.append(_timed(call))
    return [Result(c, tuple(b), f, t, None)
            for c, (b, _, _), f, t in zip(configs, prepared, firsts, times)]


# ------------------------------------------------------------------------------ reporting

def _mib(x: int | None) -> str:
    return "n/a" if x is None else f"{x / 2**20:,.1f}"


def _scaling(result: Result, reference: Result | None) -> str:
    if reference is None or result.config.num_ops < 2:
        return "—"
    def per_nlogn(r):
        n = r.config.num_ops
        return r.us_per_eval / (n * math.log2(n))
    return f"{per_nlogn(result) / per_nlogn(reference):.2f}"


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def render(results: dict[Config, Result], main: list[Config], batch: Config | None,
           sharded: Config | None,
           chunk_sweep: list[Config], population_sweep: list[Config], reference_size: int,
           header_lines: list[str], memory_lines: list[str],
           scheduler_rows: Sequence[Config] = (), decoder_rows: Sequence[Config] = (),
           backend: str = "cpu") -> str:
    """The Markdown body of the section (without its ``##`` title); ``backend`` says which
    decoder the main table's rows ran (``"auto"`` picks by backend)."""
    out = list(header_lines) + [""]
    out.append(f"Graphs: `random_computation_graph(N, seed={GRAPH_SEED})` padded to power-of-two "
               f"buckets (ops/tensors/edges); uniform random keys; latency {LATENCY}, bandwidth "
               f"{BANDWIDTH:g} B/unit, no capacity. Times are the median of the steady-state "
               "calls (after one warm-up); *compile* = first call − median call. "
               f"*t/(N log₂N)* is µs per evaluation divided by N·log₂N, relative to the "
               f"{reference_size}-op row with the same D (≈ 1 or below: no worse than N log N). "
               + _auto_decoder_note(backend))
    out.append("")
    cols = ["N ops", "bucket N/T/E", "D", "P", "compile s", "ms/call", "evals/s", "µs/eval",
            f"t/(N log₂N) vs N={reference_size}", "XLA temp MiB"]
    out += [_row(cols), _row(["---"] * len(cols))]
    for cfg in main:
        r = results[cfg]
        ref_cfg = next((c for c in main if c.num_ops == reference_size
                        and c.num_devices == cfg.num_devices), None)
        out.append(_row([
            f"{cfg.num_ops:,}", "/".join(f"{x:,}" for x in r.bucket), str(cfg.num_devices),
            f"{cfg.population:,}", f"{r.compile_s:.1f}", f"{1e3 * r.median_s:,.1f}",
            f"{r.evals_per_s:,.0f}", f"{r.us_per_eval:,.1f}",
            _scaling(r, results.get(ref_cfg)), _mib(r.temp_bytes)]))
    exponents = _exponents(results, main, reference_size)
    if exponents:
        out += ["", "Empirical growth of time per evaluation, t ∝ N^k fitted from N="
                f"{reference_size} to the largest size (N log₂N over the same range gives k ≈ "
                f"{exponents[0][1]:.2f}): " + "; ".join(
                    f"D={d}: k = {k:.2f}" for d, _, k in exponents) + "."]

    if batch is not None and batch in results:
        r, single = results[batch], _plain_row(results, main, batch)
        out += ["", f"**Batch of {batch.batch} different {batch.num_ops}-op graphs** "
                f"(`evaluate_batch`, seeds {GRAPH_SEED}..{GRAPH_SEED + batch.batch - 1}, "
                f"D={batch.num_devices}, P={batch.population} per graph, "
                f"{batch.evaluations:,} evaluations per call, bucket "
                f"{'/'.join(f'{x:,}' for x in r.bucket)}): {r.evals_per_s:,.0f} evals/s, "
                f"{r.us_per_eval:,.1f} µs/eval, compile {r.compile_s:.1f} s, XLA temp "
                f"{_mib(r.temp_bytes)} MiB"
                + (f" (one graph, same D: {single.evals_per_s:,.0f} evals/s)." if single
                   else ".")]

    if sharded is not None and sharded in results:
        r, single = results[sharded], _plain_row(results, main, sharded)
        out += ["", f"**Population sharded over {len(jax.devices())} host devices** "
                f"(`evaluate_population_sharded`, {sharded.num_ops}-op graph, "
                f"D={sharded.num_devices}, P={sharded.population}): "
                f"{r.evals_per_s:,.0f} evals/s, {r.us_per_eval:,.1f} µs/eval, compile "
                f"{r.compile_s:.1f} s"
                + (f" (unsharded, same P: {single.evals_per_s:,.0f} evals/s)." if single
                   else ".")]

    decoder_rows = [c for c in decoder_rows if c in results]
    if decoder_rows:
        out += ["", ("**Decoders** (list scheduler unless named): the ready-tree loop "
                     "(`gsched.costmodel.schedule`, what every evaluation ran before) and the "
                     "dense decodes (D = 1: `gsched.costmodel.dense`; D ≥ 2: "
                     "`gsched.costmodel.dense_multi`) on a CPU, or the fused kernels "
                     "(`gsched.costmodel.pallas_decode`; `pallas_memory`: the list kernel with "
                     "its lanes in memory, `gsched.costmodel.pallas_memory`; `pallas_lanes`: "
                     "the list kernel with one chromosome per lane, "
                     "`gsched.costmodel.pallas_lanes`; `pallas_fused` / `pallas_lanes_fused`: "
                     "the memory and lane kernels accounting SPEC §3's memory as they "
                     "schedule, `gsched.costmodel.pallas_peaks`) on a GPU, the dense decodes "
                     "and the TPU kernel (`pallas_tpu`, `gsched.costmodel.pallas_tpu`) on a "
                     "TPU; the event-driven "
                     "schedulers' loop (`gsched.costmodel.dynamic`, roofline on) is also timed "
                     "against their fused kernels on a GPU (`pallas`: "
                     "`gsched.costmodel.pallas_dynamic`; `pallas_lanes`: "
                     "`gsched.costmodel.pallas_lanes_dynamic`), elsewhere against their blocks "
                     "(`dense`: `gsched.costmodel.dense_dynamic`, at the schedulers table's "
                     "population), through "
                     "`evaluate_with_decoder`, "
                     f"unsharded and sharded over the {len(jax.devices())} host device(s); same "
                     "graphs, keys and parameters as the main table, results checked identical. "
                     "The calls of one size and D are interleaved (one of each per round), so "
                     "all see the same load; *vs loop* = median over rounds of the unsharded "
                     "loop's time / the row's time."), "",
                _row(["decoder", "N ops", "bucket N/T/E", "D", "P", "compile s", "ms/call",
                      "evals/s", "µs/eval", "vs loop"]), _row(["---"] * 10)]
        for cfg in decoder_rows:
            r = results[cfg]
            base = next((results[c] for c in decoder_rows if c.decoder == "loop"
                         and not c.sharded and c.num_ops == cfg.num_ops
                         and c.num_devices == cfg.num_devices
                         and c.scheduler == cfg.scheduler), None)
            ratio = "—" if base is None else statistics.median(
                b / t for b, t in zip(base.call_times_s, r.call_times_s))
            ratio = ratio if isinstance(ratio, str) else f"{ratio:.2f}×"
            out.append(_row([
                cfg.decoder_mode, f"{cfg.num_ops:,}", "/".join(f"{x:,}" for x in r.bucket),
                str(cfg.num_devices), f"{cfg.population:,}", f"{r.compile_s:.1f}",
                f"{1e3 * r.median_s:,.1f}", f"{r.evals_per_s:,.0f}", f"{r.us_per_eval:,.1f}",
                ratio]))

    scheduler_rows = [c for c in scheduler_rows if c in results]
    if scheduler_rows:
        out += ["", ("**Schedulers and fusion** (SPEC §8.2; the list scheduler is SPEC §2–§4; "
                     "+ fusion = SPEC §8.3 with uniform random fusion keys, no capacity). Every "
                     f"row with the §8.1 roofline on: hbm_bandwidth {HBM_BANDWIDTH:g} B/unit, "
                     f"launch_overhead {LAUNCH_OVERHEAD:g}; same graphs, latency and bandwidth "
                     "as above. *vs list* = evals/s of the row / evals/s of the list scheduler "
                     "without fusion at the same N and D. The event-driven rows run "
                     + ("their fused kernel with one chromosome per lane "
                        "(`gsched.costmodel.pallas_lanes_dynamic`) from "
                        f"{LANES_MIN_CHROMOSOMES:,} chromosomes per call, with one per "
                        "program (`gsched.costmodel.pallas_dynamic`) below on buckets of up "
                        f"to {SMALL_SLOTS['priority']:,} slots."
                        if pallas_applies(backend) else
                        "their blocks (`gsched.costmodel.dense_dynamic`); the loop of "
                        "`gsched.costmodel.dynamic` they replace is timed in the decoders "
                        "table." if backend == "cpu" else
                        "the loop of `gsched.costmodel.dynamic`.")), "",
                _row(["mode", "N ops", "bucket N/T/E", "D", "P", "compile s", "ms/call",
                      "evals/s", "µs/eval", "vs list"]), _row(["---"] * 10)]
        for cfg in scheduler_rows:
            r = results[cfg]
            base = next((results[c] for c in scheduler_rows if c.mode == "list"
                         and c.num_ops == cfg.num_ops and c.num_devices == cfg.num_devices),
                        None)
            out.append(_row([
                cfg.mode, f"{cfg.num_ops:,}", "/".join(f"{x:,}" for x in r.bucket),
                str(cfg.num_devices), f"{cfg.population:,}", f"{r.compile_s:.1f}",
                f"{1e3 * r.median_s:,.1f}", f"{r.evals_per_s:,.0f}", f"{r.us_per_eval:,.1f}",
                "—" if base is None else f"{r.evals_per_s / base.evals_per_s:.3g}×"]))

    for title, sweep, what in (("`chunk` sweep", chunk_sweep, "chunk"),
                               ("Population sweep", population_sweep, "P")):
        sweep = [c for c in sweep if c in results]
        if len(sweep) < 2:
            continue
        best = max(sweep, key=lambda c: results[c].evals_per_s)
        c0 = sweep[0]
        out += ["", f"**{title}** ({c0.num_ops}-op graph, D={c0.num_devices}"
                + (f", P={c0.population}" if what == "chunk" else f", chunk={c0.chunk_label}")
                + f"): fastest {what} = "
                f"{best.chunk if what == 'chunk' else best.population}.", "",
                _row([what, "compile s", "ms/call", "evals/s", "µs/eval", "XLA temp MiB"]),
                _row(["---"] * 6)]
        for c in sweep:
            r = results[c]
            out.append(_row([f"{c.chunk if what == 'chunk' else c.population:,}",
                             f"{r.compile_s:.1f}", f"{1e3 * r.median_s:,.1f}",
                             f"{r.evals_per_s:,.0f}", f"{r.us_per_eval:,.1f}",
                             _mib(r.temp_bytes)]))
    out += [""] + memory_lines
    return "\n".join(out).rstrip("\n") + "\n"


def _plain_row(results, main, config: Config) -> Result | None:
    """The main-table result with the same graph size and D as ``config``, if measured."""
    return next((results[c] for c in main if c.num_ops == config.num_ops
                 and c.num_devices == config.num_devices), None)


def _auto_decoder_note(backend: str) -> str:
    """Which decoder ``"auto"`` ran the main table's list-scheduler rows with on ``backend``."""
    if pallas_applies(backend):
        return ("Every row uses the fused list kernel with one chromosome per lane "
                f"(`gsched.costmodel.pallas_lanes`, Triton) from {LANES_MIN_CHROMOSOMES:,} "
                "chromosomes per call, with its lanes in memory "
                "(`gsched.costmodel.pallas_memory`) below on buckets of up to "
                f"{SMALL_SLOTS['list']:,} slots; the loop they replace is timed in "
                "the decoders table.")
    return (f"D = 1 rows up to {DENSE_MAX_OPS:,} ops (bucket) use the dense one-device decode "
            f"(`gsched.costmodel.dense`), D ≥ 2 rows up to {DENSE_MULTI_MAX_OPS:,} ops the "
            "dense multi-device one (`gsched.costmodel.dense_multi`); the loop they replace is "
            "timed in the decoders table.")


def _exponents(results, main, reference_size) -> list[tuple[int, float, float]]:
    """``(D, k of N log N, fitted k)`` from the reference size to the largest size."""
    out = []
    for d in sorted({c.num_devices for c in main}):
        rows = sorted((c for c in main if c.num_devices == d and c in results),
                      key=lambda c: c.num_ops)
        ref = next((c for c in rows if c.num_ops == reference_size), None)
        if ref is None or rows[-1].num_ops <= reference_size:
            continue
        big = rows[-1]
        ratio = big.num_ops / ref.num_ops
        nlogn = 1 + math.log(math.log2(big.num_ops) / math.log2(ref.num_ops)) / math.log(ratio)
        k = math.log(results[big].us_per_eval / results[ref].us_per_eval) / math.log(ratio)
        out.append((d, nlogn, k))
    return out


# ------------------------------------------------------------------------------ CLI

def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m eval.bench_cost_model",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=parse_int_list,
                   help="graph sizes in ops (default 100,500,2000,10000)")
    p.add_argument("--devices", type=parse_int_list, help="numbers of devices D (default 1,2,4)")
    p.add_argument("--population", type=int,
                   help="chromosomes per call for every size (default: by size and backend)")
    p.add_argument("--repeats", type=int, help="timed steady-state calls per config (default 3)")
    p.add_argument("--chunks", type=parse_int_list,
                   help="chunk values swept on the reference config (default 4,8,16)")
    p.add_argument("--sweep-populations", type=parse_int_list,
                   help="populations swept on the reference config (default P/4, 4·P; "
                        "'' for none)")
    p.add_argument("--batch-graphs", type=int,
                   help="graphs in the evaluate_batch row (default 8; 0 for none)")
    p.add_argument("--reference-size", type=int, default=REFERENCE_SIZE,
                   help="size for the scaling column and the sweeps (default 500; the nearest "
                        "benchmarked size is used if absent)")
    p.add_argument("--schedulers", type=_parse_schedulers, default=SCHEDULERS,
                   help="schedulers of the schedulers table, e.g. list,priority,fifo "
                        "(the default; '' for no table)")
    p.add_argument("--scheduler-sizes", type=parse_int_list,
                   help="graph sizes of the schedulers table (default: those of --sizes among "
                        "500,2000)")
    p.add_argument("--no-fusion", dest="fusion", action="store_false",
                   help="leave the + fusion rows (SPEC §8.3) out of the schedulers table")
    p.add_argument("--scheduler-population", type=int,
                   help="chromosomes per call in the schedulers table (default: by size, "
                        "backend and scheduler)")
    p.add_argument("--decoder-sizes", type=parse_int_list,
                   help="graph sizes of the decoders table (default: those of --sizes among "
                        "500,2000; '' for no table)")
    p.add_argument("--decoder-devices", type=parse_int_list,
                   help="numbers of devices D of the decoders table (default 1,2)")
    p.add_argument("--decoder-population", type=int,
                   help="chromosomes per call in the decoders table (default 512)")
    p.add_argument("--quick", action="store_true",
                   help="tiny smoke run: sizes 20,50, D 1,2, P 16, 2 repeats, no sweeps, "
                        "schedulers table at 50 ops with P 16")
    p.add_argument("--output", type=Path, default=DEFAULT_OUTPUT,
                   help="Markdown file to update (default docs/benchmarks.md)")
    p.add_argument("--section-title",
                   help="section to create or replace (default: from backend and device)")
    args = p.parse_args(list(argv))
    defaults = QUICK if args.quick else dict(
        sizes=DEFAULT_SIZES, devices=DEFAULT_DEVICES, population=None, repeats=3,
        chunks=DEFAULT_CHUNKS, sweep_populations=None, batch_graphs=8, scheduler_sizes=None,
        scheduler_population=None, decoder_sizes=None, decoder_devices=DEFAULT_DECODER_DEVICES,
        decoder_population=DEFAULT_DECODER_POPULATION)
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.scheduler_sizes is None:
        args.scheduler_sizes = tuple(n for n in DEFAULT_SCHEDULER_SIZES if n in args.sizes)
    if args.decoder_sizes is None:
        args.decoder_sizes = tuple(n for n in DEFAULT_DECODER_SIZES if n in args.sizes)
    if args.repeats < 1 or (args.population is not None and args.population < 1) or \
            (args.scheduler_population is not None and args.scheduler_population < 1) or \
            args.decoder_population < 1:
        p.error("--repeats, --population, --scheduler-population and --decoder-population "
                "must be >= 1")
    if not args.sizes or not args.devices or min(args.sizes + args.devices) < 1 or \
            min(args.decoder_devices, default=1) < 1:
        p.error("--sizes, --devices and --decoder-devices need positive values")
    return args


def _parse_schedulers(text: str) -> tuple[str, ...]:
    names = tuple(x for x in text.replace(" ", "").split(",") if x)
    bad = [x for x in names if x not in SCHEDULERS]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown scheduler {bad[0]!r}; expected some of "
                                         f"{','.join(SCHEDULERS)}")
    return tuple(dict.fromkeys(names))


def main(argv: Sequence[str] | None = None) -> dict[Config, Result]:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    one_device_per_core()  # for the sharded row (skipped if JAX had already started)
    backend = jax.default_backend()
    device_kind = jax.devices()[0].device_kind
    title = args.section_title or (
        f"Cost-model throughput — {backend.upper()} ({device_kind})"
        + (", quick smoke run" if args.quick else ""))

    def population(n: int) -> int:
        return args.population or default_population(n, backend)

    ref_n = min(args.sizes, key=lambda n: (abs(n - args.reference_size), n))
    ref_d = REFERENCE_DEVICES if REFERENCE_DEVICES in args.devices else args.devices[0]
    ref_p = population(ref_n)
    main_cfgs = [Config(n, d, population(n)) for n in args.sizes for d in args.devices]
    batch_cfg = None
    if args.batch_graphs > 0:
        batch_cfg = Config(ref_n, ref_d, max(1, ref_p // args.batch_graphs),
                           batch=args.batch_graphs)
    sharded_cfg = None
    if len(jax.devices()) > 1 and ref_p % len(jax.devices()) == 0:
        sharded_cfg = Config(ref_n, ref_d, ref_p, sharded=True)
    chunk_cfgs = [Config(ref_n, ref_d, ref_p, chunk=c) for c in args.chunks]
    sweep_ps = args.sweep_populations if args.sweep_populations is not None else \
        (max(1, ref_p // 4), ref_p, 4 * ref_p)
    if sweep_ps and ref_p not in sweep_ps:
        sweep_ps = tuple(sorted(set(sweep_ps) | {ref_p}))
    pop_cfgs = [Config(ref_n, ref_d, p) for p in sorted(set(sweep_ps))]
    scheduler_cfgs = [
        Config(n, d, args.scheduler_population or default_population(n, backend, s),
               scheduler=s, roofline=True, fusion=f)
        for n in args.scheduler_sizes for d in args.devices for s in args.schedulers
        for f in ((False, True) if args.fusion else (False,))]

    shardings = (False, True) if len(jax.devices()) > 1 else (False,)
    # The loop against what replaces it on this backend (evaluate.BACKEND_DECODERS).
    fast_decoders = BACKEND_DECODERS.get(backend, BACKEND_DECODERS["cpu"])
    decoder_groups = [
        [Config(n, d, args.decoder_population, decoder=decoder, sharded=sh)
         for sh in shardings if not sh or args.decoder_population % len(jax.devices()) == 0
         for decoder in ("loop", *fast_decoders)]
        for n in args.decoder_sizes for d in args.decoder_devices]
    # The event-driven schedulers' loop against what replaces it: their kernels on a GPU, their
    # blocks (gsched.costmodel.dense_dynamic) on a CPU, at the schedulers table's population.
    event_decoders = ("pallas", "pallas_lanes") if backend == "gpu" else ("dense",)
    decoder_groups += [
        [Config(n, d, args.decoder_population if backend == "gpu" else
                args.scheduler_population or default_population(n, backend, s),
                decoder=decoder, scheduler=s, roofline=True)
         for decoder in ("loop", *event_decoders)]
        for n in args.decoder_sizes for d in args.decoder_devices
        for s in args.schedulers if s != "list"]

    todo = list(dict.fromkeys(main_cfgs + ([batch_cfg] if batch_cfg else [])
                              + ([sharded_cfg] if sharded_cfg else [])
                              + chunk_cfgs + pop_cfgs + scheduler_cfgs))
    jobs = [[cfg] for cfg in todo] + decoder_groups
    log(f"[bench] backend {backend} ({device_kind}); {sum(map(len, jobs))} configs; output "
        f"{args.output}, section '{title}'")
    header = section_header("eval.bench_cost_model", argv)
    graphs = _Graphs()
    base_key = jax.random.key(0)
    results: dict[Config, Result] = {}
    start = time.perf_counter()
    for i, job in enumerate(jobs):
        what = job[0].describe() if len(job) == 1 else \
            f"{len(job)} configs interleaved: " + "; ".join(c.describe() for c in job)
        log(f"[bench] [{i + 1}/{len(jobs)}] {what}: compiling and timing "
            f"({args.repeats} repeats)…")
        t0 = time.perf_counter()
        key = jax.random.fold_in(base_key, i)
        rs = [measure(job[0], graphs, args.repeats, key)] if len(job) == 1 else \
            measure_interleaved(job, graphs, args.repeats, key)
        # ~450–1,200 memory mappings per compiled evaluation on a CPU (the §8.2 blocks the
        # most): a whole run's kept alive passed Linux's cap (gsched.infra.resources).
        resources.release_if_crowded()
        elapsed = time.perf_counter() - start
        left = len(jobs) - i - 1
        for r in rs:
            results[r.config] = r
            name = r.config.decoder_mode + ": " if len(job) > 1 else ""
            log(f"[bench]     {name}bucket {r.bucket}: "
                f"compile {r.compile_s:.1f} s, median {1e3 * r.median_s:.1f} ms/call "
                f"({', '.join(f'{1e3 * t:.0f}' for t in r.call_times_s)} ms), "
                f"{r.evals_per_s:,.0f} evals/s, {r.us_per_eval:,.1f} µs/eval, XLA temp "
                f"{_mib(r.temp_bytes)} MiB")
        log(f"[bench]     took {time.perf_counter() - t0:.1f} s, elapsed {elapsed:.0f} s"
            + (f", ~{elapsed / (i + 1) * left:.0f} s left (rough)" if left else ""))

    memory = [f"- Process peak RSS: {_rss_mib():,.0f} MiB (whole run)"]
    stats = _device_memory_stats()
    if stats:
        memory.append(f"- Device peak memory in use: {stats} MiB")
    memory.append(f"- Total benchmark wall time: {time.perf_counter() - start:.0f} s")
    body = render(results, main_cfgs, batch_cfg, sharded_cfg, chunk_cfgs if len(chunk_cfgs) > 1 else [],
                  pop_cfgs if len(pop_cfgs) > 1 else [], ref_n, header, memory,
                  scheduler_cfgs, [c for group in decoder_groups for c in group], backend)
    write_section(args.output, title, body)
    log(f"[bench] wrote section '{title}' to {args.output}")
    print(f"## {title}\n\n{body}")
    return results


def _rss_mib() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2**20 if sys.platform == "darwin" else rss / 2**10  # bytes on macOS, else KiB


def _device_memory_stats() -> str | None:
    try:
        stats = jax.devices()[0].memory_stats()
    except Exception:  # not every backend reports memory
        return None
    if not stats or "peak_bytes_in_use" not in stats:
        return None
    return f"{stats['peak_bytes_in_use'] / 2**20:,.0f}"

