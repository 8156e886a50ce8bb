"""SPEC §8.2's schedulers with one chromosome per lane (gsched.costmodel.pallas_lanes_dynamic,
decoder "pallas_lanes" with scheduler "priority" / "fifo"; "pallas_lanes_fused" accounting
SPEC §3's memory inside too), in Pallas' interpreter on the CPU: bit for bit the loop of
gsched.costmodel.dynamic and its memory walk (order, start and end times, peaks, runtime) on
random graphs with program inputs and exact key ties, D = 1–3, chunk 1 and 16, a wide graph
whose streams hold hundreds of known items at once (deep heaps, equal ready times),
populations that do not fill a program and a graph padded into a larger bucket; against the
independent reference (tests/reference_exec.py); its initial heaps against a hand-made case;
its Triton IR (lowered on the CPU; no GPU here): one barrier per step; the other accounting
kernels refuse these schedulers. Pinned ops and fusion: tests/test_pallas_memory.py; SPEC §8.4
row 5: tests/test_pallas_decode.py."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsched.core.graph import make_graph
from gsched.core.padding import Bucket, pad_graph, pad_keys
from gsched.costmodel.evaluate import evaluate_with_decoder
from gsched.costmodel.host import evaluation_to_dict, item_to_tuple
from gsched.costmodel.params import CostParams
from gsched.costmodel.pallas_dynamic import fused_schedule_and_memory
from gsched.costmodel.pallas_lanes_dynamic import ENTRY_WORDS, dynamic_lanes_memory
from gsched.costmodel.schedule import decode_placement
from gsched.generators import random_computation_graph
from tests import reference_exec as rx
from tests.graphs import with_inputs
from tests.grids import diagonal_then_slow, slow_except
from tests.test_pallas_decode import BUCKET, PARAMS, compare, small_graphs, tie_keys
from tests.test_exec_model import BUCKET as EXEC_BUCKET
from tests.test_exec_model import random_case

SCHEDULERS = ("priority", "fifo")
DECODERS = ("pallas_lanes", "pallas_lanes_fused")  # the latter accounts SPEC §3 in the kernel


def lanes(padded, keys, d, params=PARAMS, decoder="pallas_lanes", **kwargs):
    return compare(padded, keys, d, params, decoder=decoder, **kwargs)


@pytest.mark.parametrize("d, scheduler, decoder",
                         diagonal_then_slow([1, 2, 3], SCHEDULERS, DECODERS))
def test_matches_the_loop_bit_for_bit(d, scheduler, decoder):
    rng = np.random.default_rng(d)
    transfers, feasible = 0, []
    for graph in small_graphs(rng):
        got = lanes(pad_graph(graph, BUCKET), tie_keys(rng, graph, 6, d), d, decoder=decoder,
                    scheduler=scheduler)
        transfers += int(np.sum(np.asarray(got.num_steps) - graph.num_ops))
        feasible.append(np.asarray(got.feasible))
    assert (transfers > 0) == (d > 1)
    feasible = np.concatenate(feasible)
    assert feasible.any() and not feasible.all()  # the capacity bites for some


# Every other test runs the default chunk (KERNEL_CHUNK = 2); chunks 1 and 16 are slow.
@pytest.mark.parametrize("chunk, scheduler", slow_except([(1, "fifo"), (16, "priority")]))
def test_any_chunk_of_successor_entries_matches(chunk, scheduler):
    rng = np.random.default_rng(40 + chunk)
    graph = small_graphs(rng)[1]
    lanes(pad_graph(graph, BUCKET), tie_keys(rng, graph, 4, 2), 2, chunk=chunk,
          scheduler=scheduler)


def fan(width: int):
    """Op 0 feeds ``width`` ops of equal cost, which all feed one last op: once op 0 runs,
    each stream holds hundreds of known items with the same ready time (deep heaps, every
    comparison decided by slot)."""
    n = width + 2
    return make_graph(compute_cost=[1.0] + [2.0] * width + [1.0], temporary_memory=np.zeros(n),
                      tensor_producer=np.arange(width + 1), tensor_size=np.full(width + 1, 4.0),
                      tensor_is_control=np.zeros(width + 1, bool),
                      edge_tensor=np.concatenate([np.zeros(width, int), np.arange(1, width + 1)]),
                      edge_consumer=np.concatenate([np.arange(1, width + 1),
                                                    np.full(width, width + 1)]))


@pytest.mark.parametrize("scheduler", slow_except(SCHEDULERS))
def test_deep_heaps_of_equal_ready_times(scheduler):
    compare_on_a_fan("pallas_lanes", scheduler)


def compare_on_a_fan(decoder, scheduler):
    """:func:`compare` of ``decoder`` on :func:`fan` (300), D = 2, slow transfers."""
    graph = fan(300)
    bucket = Bucket(302, 301, 600)
    rng = np.random.default_rng(3)
    got = compare(pad_graph(graph, bucket), tie_keys(rng, graph, 3, 2, bucket=bucket), 2,
                  CostParams(latency=0.5, bandwidth=8.0), decoder=decoder, scheduler=scheduler)
    assert (np.asarray(got.num_steps) > graph.num_ops).all()  # transfers on both devices


@pytest.mark.parametrize("population", slow_except([1, 33], 33))
def test_populations_that_do_not_fill_a_program(population):
    rng = np.random.default_rng(population)
    graph = with_inputs(random_computation_graph(25, rng), rng)
    lanes(pad_graph(graph, BUCKET), tie_keys(rng, graph, population, 2), 2, scheduler="fifo")


def test_padding_into_a_larger_bucket_changes_nothing():
    rng = np.random.default_rng(6)
    graph = with_inputs(random_computation_graph(24, rng), rng)
    keys = rng.random((3, graph.chromosome_length(2))).astype(np.float32)
    small, large = Bucket(24, 48, 48), Bucket(64, 128, 128)
    a, b = (lanes(pad_graph(graph, bucket), pad_keys(keys, graph, bucket, 2), 2,
                  scheduler="priority") for bucket in (small, large))
    for field in ("device_peaks", "peak_memory", "runtime", "num_steps"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    for i in range(3):  # the same items at the same times, in the same order
        steps = int(a.num_steps[i])
        runs = [[(item_to_tuple(int(item), bucket.num_ops, 2), float(r.start[i, item]),
                  float(r.end[i, item])) for item in np.asarray(r.order[i, :steps])]
                for r, bucket in ((a, small), (b, large))]
        assert runs[0] == runs[1]


@pytest.mark.parametrize("scheduler, decoder", slow_except(
    [(s, d) for s in SCHEDULERS for d in DECODERS], ("fifo", "pallas_lanes_fused")))
def test_matches_the_independent_reference(scheduler, decoder):
    assert_matches_the_reference(scheduler, decoder)


def assert_matches_the_reference(scheduler, decoder):
    """``decoder`` against tests/reference_exec.py (SPEC §8 in plain Python), not the loop:
    durations exact in float32, program inputs, exact key ties in one case, the roofline in
    another."""
    cases = [(seed, random_case(seed)) for seed in (21, 23, 24)]
    for seed, (rng, graph) in cases:
        keys = rng.random(graph.chromosome_length(2)).astype(np.float32)
        if seed == 23:
            keys = np.round(keys * 4) / 4
        params = {"latency": 0.5, "bandwidth": 8192.0}
        if seed == 24:
            params |= {"hbm_bandwidth": 1024.0, "launch_overhead": 0.25}
        batch = pad_keys(keys[None], graph, EXEC_BUCKET, 2)
        got = evaluation_to_dict(jax.tree.map(lambda x: x[0], evaluate_with_decoder(
            pad_graph(graph, EXEC_BUCKET), batch, CostParams(**params), num_devices=2,
            decoder=decoder, scheduler=scheduler)), graph, EXEC_BUCKET, 2)
        want = rx.evaluate(graph, [float(k) for k in keys], 2, scheduler=scheduler, **params)
        assert got["placement"] == want["placement"]
        assert [tuple(item) for item in got["order"]] == want["order"]
        times = [want["times_exact"][item] for item in want["order"]]
        np.testing.assert_allclose(got["start"], [float(s) for s, _ in times], rtol=1e-6)
        np.testing.assert_allclose(got["end"], [float(e) for _, e in times], rtol=1e-6)
        np.testing.assert_allclose(got["device_peaks"], want["device_peaks"], rtol=1e-6)
        np.testing.assert_allclose(got["runtime"], want["runtime"], rtol=1e-6)


@pytest.mark.parametrize("fifo", [True, False])
def test_initial_heaps_hold_the_known_items_by_slot(fifo):
    # Two devices (4 streams), 8 slots of which 7 run; slots 0, 2, 3, 5 and 6 are known.
    k, width = 3, 8
    stream = np.array([[0, 1, 0, 2, 3, 0, 1, 0]], np.int32)
    waiting = np.array([[0, 1, 0, 0, 1, 0, 0, 0]], bool)
    word = np.where(waiting, (1 << k) | np.arange(width), np.arange(width)).astype(np.int32)
    rows = np.zeros((1, width, 3), np.int32)
    rows[:, :, 0] = stream
    (_, _, base, size, count), (state, heap) = (
        [np.asarray(x) for x in part] for part in dynamic_lanes_memory(
            jnp.asarray(word), jnp.asarray(rows), None, jnp.asarray([7]), k=k, num_devices=2,
            fifo=fifo))
    # Running items per stream: 3 (slots 0, 2, 5), 2 (1, 6), 1 (3), 1 (4).
    assert base.tolist() == [[0, 3, 5, 6]]
    assert size.tolist() == [[3, 1, 1, 0]]
    assert count.tolist() == [7]
    np.testing.assert_array_equal(state.reshape(width, 4), np.stack(
        [word[0], np.zeros(width), np.zeros(width), stream[0]], axis=1))
    entries = heap.reshape(-1, ENTRY_WORDS)
    assert len(entries) == (width if fifo else 2 * width)
    held = entries[0 if fifo else width:][:, 2]
    assert held[[0, 1, 2]].tolist() == [0, 2, 5] and held[3] == 6 and held[5] == 3
    assert not entries[:, :2].any()  # ready at 0


@pytest.mark.parametrize("kernel", ["priority_lanes", "fifo_lanes", "fifo_lanes_fused"])
def test_one_barrier_per_step_in_the_triton_ir(kernel):
    from eval.kernel_registers import triton_modules

    modules = triton_modules(20, 2, kernel, 2)
    assert [width for width, _ in modules] == [64, 32, 16]
    assert all(text.count("gpu.barrier") == 1 for _, text in modules)


@pytest.mark.parametrize("state", ["memory", "tpu", "registers"])
def test_only_the_lane_kernel_accounts_memory_for_the_event_driven_schedulers(state):
    graph = random_computation_graph(12, 0)
    padded = pad_graph(graph, BUCKET)
    keys = jnp.asarray(pad_keys(np.full(graph.chromosome_length(1), 0.5, np.float32), graph,
                                BUCKET, 1))
    placement = decode_placement(padded, keys, 1)
    with pytest.raises(ValueError, match=f"only the 'lanes' kernel accounts memory for "
                                         f"'priority', not the '{state}' kernel"):
        fused_schedule_and_memory(padded, keys, placement, PARAMS, 1, "priority", state=state)


def test_the_walk_after_the_kernel_needs_an_event_driven_kernel():
    # walk=True: any kernel that schedules priority / fifo, then SPEC §3's walk in its branch;
    # the list scheduler's kernel with its lanes in memory schedules no event-driven order.
    graph = random_computation_graph(12, 0)
    padded = pad_graph(graph, BUCKET)
    keys = jnp.asarray(pad_keys(np.full(graph.chromosome_length(1), 0.5, np.float32), graph,
                                BUCKET, 1))
    placement = decode_placement(padded, keys, 1)
    with pytest.raises(ValueError, match="the 'memory' kernel runs the list scheduler only, "
                                         "not 'priority'"):
        fused_schedule_and_memory(padded, keys, placement, PARAMS, 1, "priority",
                                  state="memory", walk=True)
