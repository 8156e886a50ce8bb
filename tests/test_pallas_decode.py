"""The fused Pallas kernels (gsched.costmodel.pallas_decode for the list scheduler,
gsched.costmodel.pallas_dynamic for SPEC §8.2's priority / fifo), run in Pallas' interpreter on
the CPU, against the loops (gsched.costmodel.schedule, gsched.costmodel.dynamic): every
Evaluation field bit for bit (start and end times too) for D = 1, 2, 3, with program inputs,
exact key ties, pinned ops, fusion, batches of graphs and padding; one compile per bucket and
scheduler; SPEC §5's and §8.4's worked examples; and the kernels lowered for a GPU through
Pallas' Triton backend (lowering only: no GPU here).

Interpretation is slow, so graphs stay under 30 ops and populations under 8."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsched.core.graph import make_graph
from gsched.core.padding import Bucket, batch_graphs, pad_graph, pad_keys
from gsched.costmodel import evaluate as evaluate_module
from gsched.costmodel.evaluate import evaluate_with_decoder
from gsched.costmodel.host import item_to_tuple
from gsched.costmodel.pallas_decode import (
    active_entries,
    default_num_warps,
    lane_width_index,
    lane_widths,
    pallas_applies,
    slot_tables,
    successor_columns,
)
from gsched.costmodel.pallas_dynamic import (
    fused_schedule,
    fused_schedule_and_memory,
    pallas_dynamic_schedule,
)
from gsched.costmodel.params import CostParams
from gsched.costmodel.schedule import (
    count_at_most,
    decode_placement,
    inclusive_count,
    item_devices,
    schedule_init,
)
from gsched.formats import load_graph
from gsched.generators import random_computation_graph
from tests.graphs import SHARED_DIAMOND, assert_identical, chain, diamond, with_inputs
from tests.grids import diagonal_then_slow, slow_except

BUCKET = Bucket(32, 64, 64)
# Transfers, roofline, launch overhead, a capacity some chromosomes exceed, a fusion capacity.
PARAMS = CostParams(latency=0.1, bandwidth=1e3, capacity=2e5, hbm_bandwidth=3e4,
                    launch_overhead=0.01, fusion_capacity=5e4)




def tie_keys(rng, graph, population, d, fusion=False, bucket=BUCKET):
    """Padded chromosomes whose keys are quantized to quarters (exact ties in affinities, op
    and transfer priorities), with some −0.0; fusion keys uniform."""
    length = graph.chromosome_length(d) + (graph.num_ops if fusion else 0)
    keys = rng.random((population, length))
    base = graph.chromosome_length(d)
    keys[:, :base] = np.round(keys[:, :base] * 4) / 4
    keys[:, :base][rng.random((population, base)) < 0.05] = -0.0
    return pad_keys(keys.astype(np.float32), graph, bucket, d)


def small_graphs(rng):
    """Two random graphs with program inputs, and a hand-made one: a multi-output op, a tensor
    read twice by one op, a control edge, an input."""
    return [with_inputs(random_computation_graph(n, rng), rng) for n in (12, 27)] + [
        make_graph(compute_cost=[1, 2, 3, 1], temporary_memory=[0, 5, 0, 2],
                   tensor_producer=[0, 0, 1, 2, 0], tensor_size=[8, 2, 4, 1, 0],
                   tensor_is_control=[False, False, False, False, True],
                   edge_tensor=[0, 1, 2, 3, 4], edge_consumer=[1, 1, 2, 3, 3],
                   is_input=[True, False, False, False])]


def compare(padded, keys, d, params=PARAMS, decoder="pallas", **kwargs):
    want = evaluate_with_decoder(padded, keys, params, num_devices=d, decoder="loop", **kwargs)
    got = evaluate_with_decoder(padded, keys, params, num_devices=d, decoder=decoder, **kwargs)
    assert_identical(want, got)
    return got


@pytest.mark.parametrize("d, scheduler",
                         diagonal_then_slow([1, 2, 3], ["list", "priority", "fifo"]))
def test_matches_the_loop_bit_for_bit(d, scheduler):
    feasible = compare_on_small_graphs(d, scheduler=scheduler)
    if d == 1:
        assert feasible.any() and not feasible.all()  # the capacity bites for some


def compare_on_small_graphs(d, **kwargs):
    """:func:`compare` on :func:`small_graphs` with tied keys (``kwargs``: the decoder, the
    scheduler); checks that transfers run iff ``d > 1``; returns every chromosome's
    feasibility."""
    rng = np.random.default_rng(d)
    transfers, feasible = 0, []
    for graph in small_graphs(rng):
        got = compare(pad_graph(graph, BUCKET), tie_keys(rng, graph, 6, d), d, **kwargs)
        transfers += int(np.sum(np.asarray(got.num_steps) - graph.num_ops))
        feasible.append(np.asarray(got.feasible))
    assert (transfers > 0) == (d > 1)
    return np.concatenate(feasible)


@pytest.mark.parametrize("chunk", slow_except([1, 2, 16], 16))
def test_any_chunk_of_successor_entries_matches(chunk):
    """The inner loop's window width (``eval/device_session.sh tune`` sweeps it on a GPU)."""
    rng = np.random.default_rng(40 + chunk)
    graph = small_graphs(rng)[1]
    compare(pad_graph(graph, BUCKET), tie_keys(rng, graph, 4, 2), 2, chunk=chunk)


def test_pinned_ops_and_fusion():
    rng = np.random.default_rng(4)
    graph = with_inputs(random_computation_graph(20, rng), rng)
    padded = pad_graph(graph, BUCKET)
    pinned = np.full(BUCKET.num_ops, -1, np.int32)
    pinned[[0, 3, 7]] = [1, 0, 1]
    got = compare(padded, tie_keys(rng, graph, 5, 2), 2, pinned=pinned)
    assert (np.asarray(got.placement)[:, [0, 3, 7]] == [1, 0, 1]).all()
    for d, scheduler, population in ((1, "list", 5), (2, "list", 5), (2, "priority", 2),
                                      (2, "fifo", 2)):  # a contracted graph per chromosome
        got = compare(padded, tie_keys(rng, graph, population, d, fusion=True), d, fusion=True,
                      scheduler=scheduler)
        roots = np.asarray(got.fusion)[:, :graph.num_ops]
        assert (roots != np.arange(graph.num_ops)).any()  # some ops fused


@pytest.mark.parametrize("scheduler, decoder", slow_except(
    [("list", "pallas"), ("fifo", "pallas"), ("priority", "pallas_lanes_fused")],
    ("list", "pallas")))
def test_batch_of_graphs(scheduler, decoder):
    # Nested vmaps: a two-dimensional grid (graphs × chromosomes); the lane kernels merge them
    # into one batch axis (flat_batch).
    rng = np.random.default_rng(5)
    gs = [with_inputs(random_computation_graph(n, rng), rng) for n in (6, 17, 29)]
    keys = np.stack([tie_keys(rng, g, 3, 2) for g in gs])
    compare(batch_graphs(gs, BUCKET), keys, 2, batch=True, scheduler=scheduler,
            decoder=decoder)


@pytest.mark.parametrize("scheduler", slow_except(["list", "priority"], "list"))
def test_padding_into_a_larger_bucket_changes_nothing(scheduler):
    rng = np.random.default_rng(6)
    graph = with_inputs(random_computation_graph(24, rng), rng)
    keys = rng.random((4, graph.chromosome_length(2))).astype(np.float32)
    small, large = Bucket(24, 48, 48), Bucket(64, 128, 128)  # full; padded (V_p 128 → 256)
    a = compare(pad_graph(graph, small), pad_keys(keys, graph, small, 2), 2, scheduler=scheduler)
    b = compare(pad_graph(graph, large), pad_keys(keys, graph, large, 2), 2, scheduler=scheduler)
    as_tuples = [[[item_to_tuple(int(i), bucket.num_ops, 2) for i in row if i >= 0]
                  for row in np.asarray(r.order)] for r, bucket in ((a, small), (b, large))]
    assert as_tuples[0] == as_tuples[1]
    fields = ("device_peaks", "peak_memory", "runtime", "num_steps", "feasible", "excess")
    for field in fields + (("start", "end") if scheduler != "list" else ()):
        x, y = getattr(a, field), getattr(b, field)
        if field in ("start", "end"):  # by item: the times of the items in step order
            x, y = (np.concatenate([np.asarray(t)[i, np.asarray(r.order)[i, :steps]]
                                    for i, steps in enumerate(np.asarray(a.num_steps))])
                    for t, r in ((x, a), (y, b)))
        np.testing.assert_array_equal(x, y, err_msg=field)
    np.testing.assert_array_equal(np.asarray(a.placement), np.asarray(b.placement)[:, :24])


@pytest.mark.parametrize("decoder, schedulers", slow_except(
    [("pallas", ("list", "priority")), ("pallas_tpu", ("list",)),
     ("pallas_lanes", ("list", "fifo"))],
    ("pallas", ("list", "priority"))))
def test_compiles_once_per_bucket(decoder, schedulers):
    rng = np.random.default_rng(7)
    fn = evaluate_module._evaluate_decoder
    before = fn._cache_size()
    for n in (9, 15, 22):
        g = random_computation_graph(n, rng)
        keys = pad_keys(rng.random((3, g.chromosome_length(2))), g, BUCKET, 2)
        for scheduler in schedulers:
            evaluate_with_decoder(pad_graph(g, BUCKET), keys, PARAMS, num_devices=2,
                                  decoder=decoder, scheduler=scheduler)
    assert fn._cache_size() - before == len(schedulers)


WORKED_EXAMPLE = [  # SPEC §5: (D, keys, order, device peaks, runtime)
    (1, [.5] * 4 + [.9, .8, .7, .1] + [.5] * 4,
     [("op", 0), ("op", 1), ("op", 2), ("op", 3)], [14], 10),
    (1, [.5] * 4 + [.9, .7, .8, .1] + [.5] * 4,
     [("op", 0), ("op", 2), ("op", 1), ("op", 3)], [12], 10),
    (2, [.9, .1, .9, .1, .1, .9, .9, .1] + [.9, .8, .7, .1] + [.5, .6, .5, .5, .2, .3, .5, .5],
     [("op", 0), ("op", 1), ("xfer", 0, 1), ("op", 2), ("xfer", 2, 0), ("op", 3)], [6, 12], 10),
]


@pytest.mark.skipif(not SHARED_DIAMOND.is_file(), reason="shared examples/diamond.pbtxt absent")
@pytest.mark.parametrize("d, keys, order, peaks, runtime", WORKED_EXAMPLE)
def test_worked_example(d, keys, order, peaks, runtime):
    graph = load_graph(SHARED_DIAMOND)
    bucket = Bucket(4, 4, 4)
    padded_keys = pad_keys(np.asarray([keys], np.float32), graph, bucket, d)
    got = compare(pad_graph(graph, bucket), padded_keys, d, CostParams())
    steps = int(got.num_steps[0])
    assert [item_to_tuple(int(i), 4, d) for i in np.asarray(got.order[0])[:steps]] == order
    np.testing.assert_array_equal(np.asarray(got.device_peaks[0]), peaks)
    assert float(got.runtime[0]) == runtime


def test_the_switch_and_its_checks():
    assert pallas_applies("gpu")  # every scheduler has its kernel
    assert not pallas_applies("cpu") and not pallas_applies("tpu")
    graph = pad_graph(random_computation_graph(10, 0), BUCKET)
    keys = np.zeros((2, BUCKET.chromosome_length(2)), np.float32)
    with pytest.raises(ValueError, match="scheduler"):
        evaluate_with_decoder(graph, keys, num_devices=2, decoder="pallas", scheduler="lifo")
    placement = decode_placement(jax.tree.map(jnp.asarray, graph), jnp.asarray(keys[0]), 2)
    with pytest.raises(ValueError, match="'priority' or 'fifo', got 'list'"):
        pallas_dynamic_schedule(graph, jnp.asarray(keys[0]), placement, PARAMS, 2, "list")
    # The walk after a kernel: only after one that schedules alone (the TPU kernel accounts)
    with pytest.raises(ValueError, match="unknown kernel state 'tpu' to walk after"):
        fused_schedule_and_memory(graph, jnp.asarray(keys[0]), placement, PARAMS, 2, "list",
                                  state="tpu", walk=True)


@pytest.mark.parametrize("decoder", ["pallas", "pallas_lanes"])
def test_spec_8_4_row_5_priority_on_two_devices(decoder):
    # SPEC §8.4 row 5 (the diamond, D = 2, priority): a 0–2, b 2–5, X(t0,1) 2–2, c 2–6,
    # X(t2,0) 6–6, d 6–7 (tests/test_exec_model.py checks the loop against the reference).
    keys = [.9, .1, .9, .1, .1, .9, .9, .1] + [.9, .8, .7, .1] + [.5, .6, .5, .5, .2, .3, .5, .5]
    bucket = Bucket(4, 4, 4)
    got = compare(pad_graph(diamond(), bucket),
                  pad_keys(np.asarray([keys], np.float32), diamond(), bucket, 2), 2,
                  CostParams(), decoder=decoder, scheduler="priority")
    order = np.asarray(got.order[0])[:int(got.num_steps[0])]
    assert [item_to_tuple(int(i), 4, 2) for i in order] == [
        ("op", 0), ("op", 1), ("xfer", 0, 1), ("op", 2), ("xfer", 2, 0), ("op", 3)]
    assert np.asarray(got.start[0])[order].tolist() == [0, 2, 2, 2, 6, 6]
    assert np.asarray(got.end[0])[order].tolist() == [2, 5, 2, 6, 6, 7]
    assert float(got.runtime[0]) == 7


@pytest.mark.parametrize("d, scheduler", [(1, "list"), (3, "list"), (2, "priority"),
                                          (2, "fifo")])
def test_lowers_for_a_gpu_through_triton(d, scheduler):
    # Cross-platform lowering on the CPU: Pallas' Triton backend accepts every op of the kernel
    # (power-of-two tensors, supported primitives) and emits one Triton call whose grid is the
    # batch (here 2 graphs' worth × 5 chromosomes). Triton's own compilation to PTX needs a GPU
    # and is not checked here.
    rng = np.random.default_rng(8)
    graph = random_computation_graph(20, rng)
    padded = jax.tree.map(jnp.asarray, pad_graph(graph, BUCKET))
    keys = tie_keys(rng, graph, 10, d).reshape(2, 5, -1)
    params = jax.tree.map(jnp.asarray, PARAMS)

    def one(k):
        return fused_schedule(padded, k, decode_placement(padded, k, d), params, d, scheduler,
                              interpret=False)

    lowered = jax.jit(jax.vmap(jax.vmap(one))).trace(keys).lower(lowering_platforms=("cuda",))
    text = lowered.as_text()
    # One call per lane width (V_p = 32 for D = 1, 128 for D = 2 and 3); the two vmaps merge
    # into one grid axis of 10 program instances, 2 warps each (default_num_warps up to 1,024
    # lanes).
    assert text.count("xla.gpu.triton") == {1: 2, 2: 3, 3: 3}[d]
    assert "grid_x = 10 : i32, grid_y = 1 : i32" in text and "num_warps = 2" in text


def test_default_warps_keep_the_lanes_per_warp_measured_best():
    assert [default_num_warps(w) for w in (16, 512, 1024, 2048, 4096, 65536)] == [
        2, 2, 2, 4, 8, 16]


def test_lane_width_is_the_narrowest_that_holds_every_chromosome():
    assert lane_widths(128) == (128, 64, 32) and lane_widths(32) == (32, 16)
    assert lane_widths(16) == (16,)
    widths = lane_widths(128)
    for counts, index in (([10, 100], 0), ([10, 40], 1), ([64, 3], 1), ([10, 32], 2)):
        assert int(lane_width_index(jnp.asarray(counts), widths)) == index


def test_a_chain_across_devices_runs_at_full_width():
    # 32 ops in a chain, alternately pinned to two devices: 63 items run (32 ops, 31
    # transfers), more than half of the V_p = 64 slots, so only the widest kernel holds them
    # (the identity tests above run the narrower ones).
    n = 32
    graph = chain(n)
    bucket = Bucket(32, 32, 32)
    pinned = jnp.asarray(np.arange(n) % 2, jnp.int32)
    keys = tie_keys(np.random.default_rng(9), graph, 3, 2, bucket=bucket)
    got = compare(pad_graph(graph, bucket), keys, 2, pinned=pinned)
    assert (np.asarray(got.num_steps) == 2 * n - 1).all()
    assert int(lane_width_index(jnp.asarray([2 * n - 1]), lane_widths(64))) == 0


def test_inclusive_count_is_the_cumulative_sum_by_words():
    rng = np.random.default_rng(61)
    for size in (1, 31, 32, 33, 64, 95, 5120):  # part of a word, whole words, and a word more
        for fraction in (0.0, 0.4, 1.0):
            flags = rng.random(size) < fraction
            got = np.asarray(inclusive_count(jnp.asarray(flags)))
            assert got.dtype == np.int32 and (got == np.cumsum(flags)).all(), (size, fraction)


def test_count_at_most_is_a_binary_search_of_the_ends():
    # Ranges as CSR ends: empty ones (repeated ends), positions past the last end, and ends
    # at or past the list's size.
    rng = np.random.default_rng(62)
    for size in (1, 7, 64, 3072):
        cases = [np.sort(rng.integers(0, size + 3, r)) for r in (1, 5, 300)] + [
            np.zeros(4), np.full(4, size), np.array([0, 0, size + 5])]
        for end in cases:
            end = end.astype(np.int32)
            got = np.asarray(count_at_most(jnp.asarray(end), size))
            want = np.searchsorted(end, np.arange(size), side="right")
            assert got.dtype == np.int32 and (got == want).all(), (size, end)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_active_entries_are_each_items_firing_entries(d):
    # The compacted table against the loop's: for every running item, the same successor
    # slots as its entries whose activation device is the item's device; nothing else kept
    # (the firing entries of all items fit the table, with room to spare).
    rng = np.random.default_rng(60 + d)
    for graph in small_graphs(rng):
        padded = jax.tree.map(jnp.asarray, pad_graph(graph, BUCKET))
        for k in tie_keys(rng, graph, 3, d):
            k = jnp.asarray(k[:BUCKET.chromosome_length(d)])
            placement = decode_placement(padded, k, d)
            tables, _ = schedule_init(padded, k, placement, jax.tree.map(jnp.asarray, PARAMS), d)
            item_at_rank = np.asarray(tables.item_at_rank)
            runs = np.concatenate([np.asarray(padded.op_mask), np.asarray(
                placement.transfer_exists).reshape(-1)])[item_at_rank]
            slot = np.full(len(runs), -1, np.int32)  # by item: the rank among running items
            slot[item_at_rank[runs]] = np.arange(runs.sum())
            _, _, activation = item_devices(padded, placement, d)
            successor, first, last = map(np.asarray, active_entries(
                padded, placement, jnp.asarray(slot), activation, d))
            pop, entry = np.asarray(tables.pop_row), np.asarray(tables.entry)
            kept = 0
            for r in np.nonzero(runs)[0]:
                mine = entry[pop[r, 4]:pop[r, 5]]
                want = sorted(slot[item_at_rank[mine[mine[:, 1] == pop[r, 0], 0]]])
                i = item_at_rank[r]
                assert sorted(successor[first[i]:last[i]]) == want and min(want, default=0) >= 0
                # Distinct slots: the lane kernel loads a group's words before its stores.
                assert len(set(want)) == len(want)
                kept += len(want)
            assert kept > 0 and (successor[kept:] == -1).all()
            # The kernels' slots are that ranking restricted to the running items.
            slots, _ = slot_tables(padded, k, placement, activation, d, 2)
            assert (np.asarray(slots.slot) == slot).all()
            assert (np.asarray(slots.item)[:runs.sum()] == item_at_rank[runs]).all()
            # Each slot's row columns: its first firing successors inline (−1 after its
            # last), then the range of the rest; together exactly its range in the table.
            for chunk in (1, 2, 3):
                slots, _ = slot_tables(padded, k, placement, activation, d, chunk)
                columns = np.asarray(successor_columns(slots, chunk))
                table = np.asarray(slots.successor)
                for lane in range(int(slots.count)):
                    *inline, rest, end = columns[lane]
                    begin = int(slots.first[lane])
                    assert end == slots.last[lane] and rest == begin + chunk
                    have = [x for x in inline if x >= 0] + list(table[rest:max(rest, end)])
                    assert have == list(table[begin:end])
                    assert all(x == -1 for x in inline[max(0, end - begin):])
