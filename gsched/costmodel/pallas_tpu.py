"""The list schedule's fused kernel for TPUs (Pallas' Mosaic TPU backend; decoder
``"pallas_tpu"``).

:mod:`gsched.costmodel.pallas_decode`'s kernels are written for Triton: 1-D blocks, which
Mosaic TPU rejects (it tiles the last two dimensions of a block by 8 × 128), and every
indexed update a select against the lane index, since Triton has no scratch memory and reads
memory with scalar loads only from global memory. A TPU core is shaped the other way: a
scalar unit with its own memory (SMEM: 1 MiB per core from v4 on, scalar loads and stores at
any address) beside a vector unit whose registers hold ``8 × 128`` int32 lanes each. So this
kernel, for the same inputs and bit for bit the same outputs as the list kernel
(:func:`~gsched.costmodel.pallas_decode.batched_kernel` prepares both):

* keeps only the words in vector registers, ``[R, 128]`` (``R = V_p / 128``; a 2,048-slot
  chromosome is 2 of a core's registers' worth of lanes): the next item is their minimum, one
  reduction; retiring an item and a successor's lost dependency are selects against the lane
  index, as in the Triton kernels;
* keeps the ready times in SMEM scratch, one scalar per slot (hi, lo), and the rows and the
  firing successor entries in SMEM inputs: a step reads its item's row and ready time with
  scalar loads, and a successor's ready time is *set* to the step's end with one scalar store
  (the list kernel's rule: the last predecessor to fire has the latest end,
  :func:`~gsched.costmodel.pallas_decode.walk_successors` with ``ends_grow``), so per step the
  vector work is ``O(V_p / 1,024)`` registers per select, not a masked reduction for the ready
  time. A store whose successor is none (−1) goes to a sink slot past the last, so no store
  is predicated.

SPEC §3's memory is accounted in the same step (:func:`~gsched.costmodel.pallas_peaks.account`,
the ``pallas_fused`` decoder's, on SMEM: the copies' read counts are scratch), so the kernel
returns the schedule and its memory profile (decoder ``"pallas_tpu"``).

Blocks: one program per chromosome on an explicit grid marked parallel, each chromosome's
arrays with a leading axis of one (``[1, n]``, SMEM) or the words' ``[R, 128]`` shape, so the
blocks' last two dimensions equal the arrays' (:class:`TpuProgramPerChromosome`). The tables
must fit SMEM, inputs and outputs double-buffered (:func:`smem_words`; 500 ops at D = 2 need
0.39 MiB of a v4–v6e core's 1 MiB, 2,000 ops 1.56 MiB), or a call on a TPU raises
(:func:`check_smem`).

On a TPU a ``pallas_call``'s grid runs one program after another on a core, unlike a GPU's
SMs, which hold several at once, so this kernel evaluates one chromosome at a time per core;
the loop decoder runs every chromosome of a population in each iteration. Which is faster at
which population only a TPU can say, so "auto" keeps the loop there and ``make bench`` on a
TPU times both (docs/design.md).

Verified without a TPU: bit for bit against the loop in Pallas' interpreter
(``tests/test_pallas_memory.py``, ``eval.check_decoders --decoders pallas_tpu``), lowered
through Mosaic (``tests/test_pallas_tpu.py``) and compiled by the TPU compiler ahead of time
on a CPU (libtpu, ``python -m eval.tpu_compile``, which needs the optional ``jax[tpu]``).
Not timed.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from gsched.core import fixedpoint as fp
from gsched.costmodel.pallas_peaks import PeakOffsets, Scalars, account
from gsched.costmodel.schedule import kernel_step_times

LANES = 128  # the vector registers' minor dimension
SMEM_FRACTION = 0.9  # of a core's SMEM the tables may take (check_smem; the rest: the compiler's)


def smem_words(vp: int, columns: int, entries: int, tail: int = 4,
               fixed_scratch: tuple[int, ...] = ()) -> int:
    """int32 words of SMEM one program instance takes at ``vp`` slots (rounded up to
    :data:`LANES`), ``columns`` row columns, an entry table of ``entries`` words and a tail of
    ``tail``: the inputs and outputs twice (Mosaic double-buffers a grid's blocks), the scratch
    once (the ready times and each of ``fixed_scratch``, each with its sink)."""
    width = -(-vp // LANES) * LANES
    return (2 * (width * columns + entries + width + tail) + 2 * (width + 1)
            + sum(size + 1 for size in fixed_scratch))


def smem_capacity() -> int:
    """Bytes of SMEM per core of this TPU."""
    return pltpu.get_tpu_info().smem_capacity_bytes


def fits_smem(words: int, capacity: int) -> bool:
    """Whether ``words`` (:func:`smem_words`) fit :data:`SMEM_FRACTION` of ``capacity`` bytes."""
    return 4 * words <= SMEM_FRACTION * capacity


def check_smem(words: int) -> None:
    """Raises a ``ValueError`` when a chromosome's ``words`` of SMEM (:func:`smem_words`) do
    not fit this TPU's (:func:`fits_smem`); called when the kernel is compiled for a TPU."""
    if jax.default_backend() != "tpu":  # compiled ahead of time elsewhere: the compiler says
        return
    capacity = smem_capacity()
    if not fits_smem(words, capacity):
        raise ValueError(
            f"the TPU kernel's tables ({4 * words:,} bytes per chromosome with double "
            f"buffering) exceed {SMEM_FRACTION:.0%} of this TPU's {capacity:,} bytes of SMEM; "
            f"use the loop decoder for this bucket")


@dataclasses.dataclass(frozen=True)
class TpuProgramPerChromosome:
    """A kernel layout (:func:`~gsched.costmodel.pallas_decode.batched_kernel`'s ``layout``)
    for Pallas' Mosaic TPU backend: one program per chromosome on a grid over the batch marked
    parallel (the two cores of a v4 or v5p chip share it). A program sees ``word [R, 128]``
    (VMEM; ``width`` rounded up to 128 lanes, the extra lanes never taken: their word is the
    kernel's own ``never`` parameter), ``rows [1, R·128·C]`` (a slot's row at ``slot·C``) and
    ``successor [1, Q]`` (SMEM), the outputs ``[1, R·128]`` and ``[1, tail]`` (SMEM), then
    ``scratch`` SMEM buffers of ``R·128 + 1`` words and one of ``size + 1`` for each of
    ``fixed_scratch`` (the last word of each: a sink for stores that go nowhere)."""

    scratch: int = 0
    fixed_scratch: tuple[int, ...] = ()

    def __call__(self, kernel, width: int, k: int, interpret: bool, per_step: int, tail: int,
                 params: dict):
        """``(word [B, width], rows [B, width, C], successor [B, Q], count [B]) → (*per_step
        outputs [B, width], tail [B, tail])``."""
        del k
        never = params["never"]
        if not interpret and jax.default_backend() == "gpu":
            raise NotImplementedError("the TPU kernel is written for Pallas' Mosaic TPU "
                                      "backend; on a GPU use decoder 'pallas' or "
                                      "'pallas_fused'")
        lanes = -(-width // LANES) * LANES

        def block(shape, memory_space):
            """One chromosome's block of a ``[B, *shape]`` array (the batch axis squeezed)."""
            return pl.BlockSpec((None, *shape), lambda i: (i, 0, 0), memory_space=memory_space)

        def run(word, rows, successor, count):
            del count
            batch, pad = word.shape[0], lanes - width
            word = jnp.pad(word, ((0, 0), (0, pad)), constant_values=never).reshape(
                batch, lanes // LANES, LANES)
            rows = jnp.pad(rows, ((0, 0), (0, pad), (0, 0))).reshape(batch, 1, -1)
            successor = successor[:, None]
            outputs = (lanes,) * per_step + (tail,)
            *steps, last = pl.pallas_call(
                kernel,
                grid=(batch,),
                out_shape=[jax.ShapeDtypeStruct((batch, 1, n), jnp.int32) for n in outputs],
                in_specs=[block(word.shape[1:], pltpu.VMEM),
                          *(block(x.shape[1:], pltpu.SMEM) for x in (rows, successor))],
                out_specs=[block((1, n), pltpu.SMEM) for n in outputs],
                scratch_shapes=[pltpu.SMEM((1, size + 1), jnp.int32)
                                for size in (lanes,) * self.scratch + self.fixed_scratch],
                compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
                interpret=interpret,
                name="gsched_schedule_tpu",
            )(word, rows, successor)
            return (*(x[:, 0, :width] for x in steps), last[:, 0])

        return run


def smem_scalars(ref) -> Scalars:
    """:class:`~gsched.costmodel.pallas_peaks.Scalars` of a ``[1, n]`` SMEM ref: a store that
    is not ``valid`` goes to the last word (a scratch buffer's sink,
    :class:`TpuProgramPerChromosome`)."""
    sink = ref.shape[1] - 1

    def store(i, value, valid):
        ref[0, jnp.where(valid, i, sink)] = value

    return Scalars(lambda i: ref[0, i], store)


def tpu_list_kernel(word_ref, rows_ref, successor_ref, order_ref, tail_ref, ready_hi_ref,
                    ready_lo_ref, counts_ref, *, num_devices: int, chunk: int, k: int,
                    never: int, peaks: PeakOffsets):
    """One chromosome's list schedule (module docstring): ``word [R, 128]``, ``rows [1,
    R·128·C]`` (by slot: device, source device, duration hi, lo, then
    :func:`~gsched.costmodel.pallas_decode.successor_columns`), ``successor [1, Q]`` →
    ``order [1, R·128]`` (the slot taken at each step), ``tail [1, 4]`` (makespan hi, lo,
    steps taken, 0); scratch: the ready times ``[1, R·128 + 1]`` (hi, lo). The devices' free
    times are ``2·D`` scalars, as in the Triton kernel.

    SPEC §3's memory is accounted as it schedules (:func:`~gsched.costmodel.pallas_peaks.
    account`, scalar work in SMEM): the rows go on with that module's columns,
    ``successor_ref`` holds its regions at ``peaks``, the scratch ``counts [1, C_p + 1]``
    follows the ready times, and ``tail`` goes on with each device's peak (hi, lo) at
    ``4 + 2·d``."""
    shape = word_ref.shape
    lanes = shape[0] * shape[1]
    columns = rows_ref.shape[1] // lanes
    lane = (lax.broadcasted_iota(jnp.int32, shape, 0) * shape[1]
            + lax.broadcasted_iota(jnp.int32, shape, 1))
    mask = (1 << k) - 1

    def clear(i, _):
        ready_hi_ref[0, i] = jnp.int32(0)
        ready_lo_ref[0, i] = jnp.int32(0)

    lax.fori_loop(0, lanes + 1, clear, None)

    def copy(i, _):  # the copies' read counts; SMEM is read one word at a time
        counts_ref[0, i] = successor_ref[0, peaks.counts + i]

    lax.fori_loop(0, peaks.num_counts, copy, None)
    table, counts, ready_hi, ready_lo = (smem_scalars(ref) for ref in (
        successor_ref, counts_ref, ready_hi_ref, ready_lo_ref))

    def lower(word, target, end):
        """A firing successor ``target`` (−1: none) loses a dependency and is ready at
        ``end`` (stored in the sink slot for none)."""
        ready_hi.store(target, end.hi, target >= 0)
        ready_lo.store(target, end.lo, target >= 0)
        return jnp.where(lane == target, word - (1 << k), word)

    def step(carry):
        s, best, word, free, memory = carry
        slot = best & mask
        order_ref[0, s] = slot
        row = [rows_ref[0, slot * columns + c] for c in range(columns)]
        device, source, duration_hi, duration_lo, *inline, first, last = row[:6 + chunk]
        memory = account(table, counts, row[6 + chunk:], device, source, memory,
                         num_devices=num_devices, at=peaks)
        ready = fp.Fixed(ready_hi.load(slot), ready_lo.load(slot))
        end, after = kernel_step_times(ready, free, device, source,
                                       fp.Fixed(duration_hi, duration_lo), num_devices)
        word = jnp.where(lane == slot, never, word)
        for target in inline:
            word = lower(word, target, end)

        def rest(carry):
            q, word = carry
            for j in range(chunk):
                word = lower(word, jnp.where(q + j < last, successor_ref[0, q + j], -1), end)
            return q + chunk, word

        _, word = lax.while_loop(lambda c: c[0] < last, rest, (first, word))
        return s + 1, jnp.min(word), word, after, memory

    word = word_ref[...]
    zero = jnp.int32(0)
    nothing = tuple(fp.Fixed(zero, zero) for _ in range(num_devices))
    taken, _, _, free, memory = lax.while_loop(
        lambda c: c[1] < (1 << k), step,
        (zero, jnp.min(word), word, nothing,
         tuple((x, x) for x in nothing)))  # (live, peak) per device
    makespan = functools.reduce(fp.maximum, free)
    for i, x in enumerate((makespan.hi, makespan.lo, taken, zero)):
        tail_ref[0, i] = x
    for d, (_, peak) in enumerate(memory):
        tail_ref[0, 4 + 2 * d] = peak.hi
        tail_ref[0, 5 + 2 * d] = peak.lo
