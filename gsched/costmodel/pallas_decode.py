"""The list schedule (SPEC §2, §4) as one fused Pallas kernel per chromosome, for accelerators.

The ready-tree loop of :mod:`gsched.costmodel.schedule` runs as an XLA ``while_loop`` whose body
is ~30 small kernels; on a GPU each is a launch, paid at every step. Here the whole schedule of
one chromosome is one program instance of a ``pallas_call`` (batched with ``jax.vmap``, which
turns the population into the kernel's grid): the ready set, the ready times and the device
free times live in the kernel as loop-carried vectors, and nothing leaves it until the makespan
is known. Any ``D``; the list scheduler only.

Plain JAX prepares each chromosome's inputs with the loop decoder's own
:func:`~gsched.costmodel.schedule.schedule_init` (ranks, fixed-point durations, in-degrees, CSR
successor entries, devices) and turns the kernel's outputs back into a :class:`Schedule` with
:func:`~gsched.costmodel.schedule.schedule_result`, so both decoders share every rule but the
loop itself. Inside the kernel, everything is indexed by *slot*: the rank among the items that
can run (real ops and existing transfers; absent transfer slots are most of ``V = N + T·D`` at
``D ≥ 2``), ``V_p`` slots: the static bound ``N + min(E, T·(D − 1))`` rounded up to a power of
two, as Triton wants for every tensor:

* ``word [V_p]``: ``(unfinished dependencies << k) | slot`` for an item that can still run
  (``k`` = bits of a slot), :data:`NEVER` for unused slots and items already scheduled, so the
  ready item with the largest priority is ``min(word)`` (ready words are ``< 2**k``);
* ``ready [V_p]`` (hi, lo) and ``free [D_p]`` (hi, lo): exact fixed-point ready and free times;
* ``steps [V_p]``: ``−1 − step`` once scheduled (the loop's encoding), else 0.

A step takes the minimum word, reads the item's device, source device, duration and entry range
with scalar loads, computes its start and end (SPEC §4), and walks its successor entries
``chunk`` at a time: one contiguous ``[chunk]`` load of slots and activation devices, compared
against the lane index (``[chunk, V_p]``) and summed over the chunk, so decrementing in-degrees
and raising ready times are vector selects instead of scatters. Per step that is ``O(V_p)``
work plus ``O(chunk · V_p)`` per chunk of entries, ``O((V_p + Q) · V_p)`` per chromosome (``Q``
successor entries). So the kernel is compiled at up to three widths (``V_p``, ``V_p / 2``,
``V_p / 4``: :func:`lane_widths`) and a call runs the narrowest that holds every chromosome's
running items (often about 40 % of the static bound at ``D ≥ 2``), chosen once per call by a
``lax.switch`` outside the grid.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

from gsched.core import fixedpoint as fp
from gsched.core.batching import flat_batch
from gsched.core.padding import PaddedGraph
from gsched.costmodel.params import CostParams
from gsched.costmodel.schedule import (
    TIME_LO_BITS,
    Placement,
    Schedule,
    schedule_init,
    schedule_result,
)

NEVER = (1 << 31) - 1  # the word of an item that cannot, or can no longer, be taken


def pallas_applies(scheduler: str = "list", backend: str | None = None) -> bool:
    """Whether the "auto" decoder schedules with this kernel: the list scheduler on a GPU
    (``backend``, default JAX's default backend; a static choice). Not on a TPU: Mosaic TPU
    rejects the kernel's 1-D blocks (it tiles the last two dimensions by 8 × 128)."""
    return scheduler == "list" and (backend or jax.default_backend()) == "gpu"


def pallas_schedule(graph: PaddedGraph, keys: jnp.ndarray, placement: Placement,
                    params: CostParams, num_devices: int, chunk: int = 8,
                    interpret: bool | None = None) -> Schedule:
    """One chromosome's list schedule (no batch axis; ``jax.vmap`` makes the population the
    kernel's grid), bit for bit the loop decoder's :class:`Schedule`.

    ``keys``: the SPEC §2 part of the padded chromosome; ``chunk``: successor entries per inner
    iteration (rounded up to a power of two); ``interpret``: run the kernel in Pallas'
    interpreter (default: on a CPU, where nothing else runs it)."""
    tables, state = schedule_init(graph, keys, placement, params, num_devices)
    n, t, e = graph.op_mask.shape[0], graph.tensor_mask.shape[0], graph.edge_mask.shape[0]
    v = tables.pop_row.shape[0]
    # The items that run (real ops, existing transfers) get *slots*, their ranks renumbered
    # without the others; at most N + min(E, T·(D − 1)) of them (an existing X(t, d) has its own
    # edge (t, consumer on d)), often a fraction of V = N + T·D.
    runs = jnp.concatenate([graph.op_mask, placement.transfer_exists.reshape(-1)])[
        tables.item_at_rank]  # by rank
    slot = jnp.where(runs, jnp.cumsum(runs, dtype=jnp.int32) - 1, -1)  # by rank
    vp = pl.next_power_of_2(n + min(e, t * (num_devices - 1)))
    rank_at_slot = jnp.zeros(vp, jnp.int32).at[jnp.where(runs, slot, vp)].set(
        jnp.arange(v, dtype=jnp.int32), mode="drop")
    chunk = pl.next_power_of_2(chunk)
    k = max(1, (vp - 1).bit_length())
    if (e + 1) << k > NEVER:
        raise ValueError(f"{vp} item slots and {e} edges overflow the kernel's 31-bit words")
    indegree = state.node[rank_at_slot, 0]
    lane = jnp.arange(vp, dtype=jnp.int32)
    count = jnp.sum(runs, dtype=jnp.int32)
    word = jnp.where(lane < count, jnp.left_shift(indegree, k) | lane, NEVER)
    # Entries as rows [slot, activation device] (an entry whose item never runs is never
    # activated), with ``chunk`` inert columns so that every window ``[q, q + chunk)`` with ``q``
    # inside the table is in bounds.
    entry = jnp.pad(jnp.stack([slot[tables.entry[:, 0]], tables.entry[:, 1]]),
                    ((0, 0), (0, chunk)), constant_values=-1)

    one = (word[None], tables.pop_row[rank_at_slot][None], entry[None], count[None])
    steps, makespan = (x[0] for x in _batched_decode(num_devices, chunk, k, interpret)(*one))
    final = state._replace(
        node=state.node.at[:v, 0].set(jnp.where(runs, steps[slot], 0)),
        free=makespan[None, :],  # one row: the last end is its own maximum
        step=jnp.sum(steps < 0, dtype=jnp.int32))
    return schedule_result(tables, final)


def lane_widths(vp: int) -> tuple[int, ...]:
    """The kernel widths compiled for ``vp`` slots, widest first: ``vp``, ``vp / 2`` and
    ``vp / 4`` (not below 16). A call runs the narrowest that holds every chromosome's running
    items (:func:`lane_width_index`): the kernel's work per step is linear in its width."""
    return tuple(w for w in (vp, vp // 2, vp // 4) if w == vp or w >= 16)


def lane_width_index(count: jnp.ndarray, widths: tuple[int, ...]) -> jnp.ndarray:
    """Index into ``widths`` (widest first) of the narrowest holding ``max(count)`` slots."""
    most = jnp.max(count)
    return sum((most <= w).astype(jnp.int32) for w in widths[1:])


@functools.cache
def _batched_decode(num_devices: int, chunk: int, k: int, interpret: bool | None):
    """``(word [B, V_p], pop_row [B, V_p, 6], entry [B, 2, Q + chunk], count [B])`` →
    ``(steps [B, V_p], makespan [B, 2])``: the kernel vmapped over the batch (its grid), at the
    narrowest of :func:`lane_widths` that holds the whole batch (one ``lax.switch``). A
    :func:`~gsched.core.batching.flat_batch` function: vmapping it (over graphs, or a caller's
    own ``vmap``) merges the new axis into the batch, so the width stays one unbatched choice."""

    def decode(word, pop_row, entry, count):
        vp = word.shape[1]

        def at_width(w):
            kw = max(1, (w - 1).bit_length())

            def run(word, pop_row, entry):
                narrow = jnp.where(word[:, :w] == NEVER, NEVER, jnp.left_shift(
                    jnp.right_shift(word[:, :w], k), kw) | (word[:, :w] & ((1 << kw) - 1)))
                steps, makespan = jax.vmap(_decode_call(w, num_devices, chunk, kw, interpret))(
                    narrow, pop_row[:, :w], entry)
                return jnp.pad(steps, ((0, 0), (0, vp - w))), makespan

            return run

        widths = lane_widths(vp)
        return lax.switch(lane_width_index(count, widths), [at_width(w) for w in widths],
                          word, pop_row, entry)

    return flat_batch(decode)


def _decode_call(vp: int, num_devices: int, chunk: int, k: int, interpret: bool | None):
    """The ``pallas_call``: ``(word [V_p], pop_row [V_p, 6], entry [2, Q + chunk])`` int32, by
    slot → ``(steps [V_p], makespan [2])`` int32 (hi, lo)."""
    backend = jax.default_backend()
    if interpret is None:
        interpret = backend == "cpu"
    if not interpret and backend == "tpu":
        raise NotImplementedError("the fused decode kernel is written for Pallas' Triton (GPU) "
                                  "backend; on a TPU use the loop decoder or interpret=True")
    # Triton, not Mosaic GPU; the loop state lives in registers, spread over the warps.
    triton = plt.CompilerParams(num_warps=min(16, max(4, vp // 256)))
    return pl.pallas_call(
        lambda *refs: _kernel(*refs, num_devices=num_devices, chunk=chunk, k=k),
        out_shape=(jax.ShapeDtypeStruct((vp,), jnp.int32), jax.ShapeDtypeStruct((2,), jnp.int32)),
        interpret=interpret,
        compiler_params=None if interpret else triton,
        name="gsched_list_schedule",
    )


def _kernel(word_ref, pop_ref, entry_ref, steps_ref, makespan_ref, *, num_devices: int,
            chunk: int, k: int):
    """One chromosome's schedule (see the module docstring); refs as in :func:`_decode_call`."""
    vp = word_ref.shape[0]
    dp = pl.next_power_of_2(num_devices)
    lane = lax.broadcasted_iota(jnp.int32, (vp,), 0)
    device_lane = lax.broadcasted_iota(jnp.int32, (dp,), 0)
    chunk_lane = lax.broadcasted_iota(jnp.int32, (chunk,), 0)
    zeros = jnp.zeros((vp,), jnp.int32)

    def walk(end, device, last):
        """Inner loop body: entries ``[q, q + chunk)`` of the current item (``< last``)."""

        def body(carry):
            q, word, ready_hi, ready_lo = carry
            succ = entry_ref[0, pl.ds(q, chunk)]
            on = (q + chunk_lane < last) & (entry_ref[1, pl.ds(q, chunk)] == device)
            hit = jnp.sum(jnp.where((succ[:, None] == lane[None, :]) & on[:, None], 1, 0),
                          axis=0)  # [V_p], 0 or 1: an item's entries are distinct
            raised = fp.maximum(fp.Fixed(ready_hi, ready_lo), end)
            active = hit > 0
            return (q + chunk, word - jnp.left_shift(hit, k),
                    jnp.where(active, raised.hi, ready_hi), jnp.where(active, raised.lo, ready_lo))

        return body

    def step(carry):
        s, best, word, steps, ready_hi, ready_lo, free_hi, free_lo = carry
        slot = best & ((1 << k) - 1)
        device, source, duration_hi, duration_lo, first, last = (
            pop_ref[slot, column] for column in range(6))
        this = lane == slot
        ready = fp.Fixed(jnp.sum(jnp.where(this, ready_hi, 0)),
                         jnp.sum(jnp.where(this, ready_lo, 0)))
        uses = (device_lane == device) | (device_lane == source)
        start = fp.maximum(ready, fp.masked_max(fp.Fixed(free_hi, free_lo), uses))
        end = fp.add(start, fp.Fixed(duration_hi, duration_lo), TIME_LO_BITS)
        _, word, ready_hi, ready_lo = lax.while_loop(
            lambda c: c[0] < last, walk(end, device, last),
            (first, jnp.where(this, NEVER, word), ready_hi, ready_lo))
        return (s + 1, jnp.min(word), word, jnp.where(this, -1 - s, steps), ready_hi, ready_lo,
                jnp.where(uses, end.hi, free_hi), jnp.where(uses, end.lo, free_lo))

    word = word_ref[...]
    free = jnp.zeros((dp,), jnp.int32)
    _, _, _, steps, _, _, free_hi, free_lo = lax.while_loop(
        lambda c: c[1] < (1 << k), step,
        (jnp.int32(0), jnp.min(word), word, zeros, zeros, zeros, free, free))
    steps_ref[...] = steps
    makespan = fp.masked_max(fp.Fixed(free_hi, free_lo), device_lane < num_devices)
    makespan_ref[0] = makespan.hi
    makespan_ref[1] = makespan.lo
