"""SPEC §8.1 roofline kernel times and §8.2's event-driven ``"priority"`` / ``"fifo"``
schedulers in the jitted cost model, against SPEC §8.4 and the independent reference
(tests/reference_exec.py). Fusion (§8.3) is not covered here.

Random cases use durations that are exact in float32 (costs in 1/16ths, integer sizes,
power-of-two bandwidths), so the reference's exact ties are ties here too and placement, order,
start and end times can be compared exactly; peaks and runtime to 1e-6 relative.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from gsched import layered_graph, random_computation_graph
from gsched.core.padding import Bucket, batch_graphs, bucket_for, pad_graph, pad_keys
from gsched.costmodel.evaluate import evaluate_batch, evaluate_population
from gsched.costmodel.host import evaluate_graph, evaluate_order
from gsched.costmodel.params import CostParams, check_cost_params
from gsched.costmodel.schedule import op_bytes, op_durations
from tests import reference_exec as rx
from tests.graphs import diamond

SCHEDULERS = ("list", "priority", "fifo")
BUCKET = Bucket(64, 128, 256)  # every random graph below: one compile per (D, scheduler)

D1_KEYS = [.5] * 4 + [.9, .8, .7, .1] + [.5] * 4
D2_KEYS = [.9, .1, .9, .1, .1, .9, .9, .1] + [.9, .8, .7, .1] + [.5, .6, .5, .5, .2, .3, .5, .5]


def op(j):
    return ["op", j]


def xf(t, d):
    return ["xfer", t, d]


def exact_durations(graph, rng=None, inputs=0.0):
    """``graph`` with costs in 1/16ths and integer sizes (exact in float32), and optionally a
    random fraction of its source ops marked as program inputs (SPEC §1)."""
    graph = graph.replace(compute_cost=np.round(graph.compute_cost * 16) / 16,
                          tensor_size=np.round(graph.tensor_size),
                          temporary_memory=np.round(graph.temporary_memory))
    if inputs:
        source = np.ones(graph.num_ops, bool)
        source[graph.edge_consumer] = False
        graph = graph.replace(is_input=source & (rng.random(graph.num_ops) < inputs))
    return graph


def assert_matches_reference(graph, keys, d, scheduler, bucket=None, **params):
    got = evaluate_graph(graph, keys, d, scheduler=scheduler, bucket=bucket, **params)
    want = rx.evaluate(graph, [float(k) for k in keys], d, scheduler=scheduler, **params)
    assert got["placement"] == want["placement"]
    assert [tuple(item) for item in got["order"]] == want["order"]
    np.testing.assert_allclose(got["device_peaks"], want["device_peaks"], rtol=1e-6)
    np.testing.assert_allclose(got["runtime"], want["runtime"], rtol=1e-6)
    assert got["feasible"] == want["feasible"]
    if scheduler == "list":
        assert "start" not in got and "end" not in got
    else:
        times = [want["times_exact"][item] for item in want["order"]]
        np.testing.assert_allclose(got["start"], [float(s) for s, _ in times], rtol=1e-6)
        np.testing.assert_allclose(got["end"], [float(e) for _, e in times], rtol=1e-6)
    return got


# ---------------------------------------------------------------------------------------------
# SPEC §8.4 (rows without fusion)
# ---------------------------------------------------------------------------------------------

def test_row3_roofline_single_device():
    # a: max(2, 4/1) = 4; b: max(3, (4 + 2)/1) = 6; c: max(4, 4 + 3) = 7; d: max(1, 2+3+1) = 6.
    got = evaluate_graph(diamond(), D1_KEYS, 1, hbm_bandwidth=1.0)
    assert got["order"] == [op(0), op(1), op(2), op(3)]
    assert got["device_peaks"] == [14.0] and got["runtime"] == 23.0
    for scheduler in ("priority", "fifo"):  # one stream: the same order and times
        dyn = assert_matches_reference(diamond(), D1_KEYS, 1, scheduler, hbm_bandwidth=1.0)
        assert dyn["order"] == got["order"] and dyn["runtime"] == 23.0
        assert dyn["start"] == [0, 4, 10, 17] and dyn["end"] == [4, 10, 17, 23]


def test_row5_priority_two_devices():
    got = evaluate_graph(diamond(), D2_KEYS, 2, scheduler="priority")
    assert got["placement"] == [0, 0, 1, 0]
    assert got["order"] == [op(0), op(1), xf(0, 1), op(2), xf(2, 0), op(3)]
    assert got["device_peaks"] == [6.0, 12.0] and got["runtime"] == 7.0
    # a 0–2, b 2–5, X(t0,1) 2–2, c 2–6, X(t2,0) 6–6, d 6–7.
    assert got["start"] == [0, 2, 2, 2, 6, 6] and got["end"] == [2, 5, 2, 6, 6, 7]
    assert_matches_reference(diamond(), D2_KEYS, 2, "priority")
    assert_matches_reference(diamond(), D2_KEYS, 2, "fifo")
    # The list scheduler (§4, synchronous transfers) keeps §5's runtime.
    assert evaluate_graph(diamond(), D2_KEYS, 2)["runtime"] == 10.0


def test_kernel_bytes_and_durations():
    g = pad_graph(diamond(), Bucket(8, 8, 8))
    # a: reads -, writes t0 (4); b: t0 + t1 = 6; c: t0 + t2 = 7; d: t1 + t2 + t3 = 6.
    assert op_bytes(g)[:4].tolist() == [4, 6, 7, 6] and not op_bytes(g)[4:].any()
    params = check_cost_params(hbm_bandwidth=2.0, launch_overhead=0.5)
    assert op_durations(g, params)[:4].tolist() == [2.5, 3.5, 4.5, 3.5]
    assert not op_durations(g, params)[4:].any()
    assert op_durations(g, CostParams()).tolist() == g.compute_cost.tolist()


# ---------------------------------------------------------------------------------------------
# Random cross-checks against the reference
# ---------------------------------------------------------------------------------------------

def random_case(seed):
    rng = np.random.default_rng(seed)
    if seed % 3 == 2:
        graph = layered_graph(int(rng.integers(10, 40)), rng)
    else:
        graph = random_computation_graph(int(rng.integers(5, 60)), rng)
    graph = exact_durations(graph, rng, inputs=0.5 if seed % 2 else 0.0)
    assert graph.num_ops <= BUCKET.num_ops and graph.num_tensors <= BUCKET.num_tensors \
        and graph.num_edges <= BUCKET.num_edges
    return rng, graph


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@pytest.mark.parametrize("d", [1, 2, 3])
def test_random_graphs_match_reference(d, scheduler):
    for seed in range(4):
        rng, graph = random_case(10 * d + seed)
        keys = rng.random(graph.chromosome_length(d)).astype(np.float32)
        if seed == 3:  # many exact ties between priorities
            keys = np.round(keys * 4) / 4
        params = {"latency": float(rng.choice([0.0, 0.5])),
                  "bandwidth": float(rng.choice([np.inf, 8192.0]))}
        if seed % 2 == 0:  # the roofline
            params |= {"hbm_bandwidth": float(rng.choice([1024.0, 16384.0])),
                       "launch_overhead": float(rng.choice([0.0, 0.25]))}
        assert_matches_reference(graph, keys, d, scheduler, bucket=BUCKET, **params)


@pytest.mark.parametrize("scheduler", ("priority", "fifo"))
def test_capacity_and_pinning_match_reference(scheduler):
    rng, graph = random_case(5)
    keys = rng.random(graph.chromosome_length(2)).astype(np.float32)
    free = evaluate_graph(graph, keys, 2, scheduler=scheduler, bucket=BUCKET)
    cap = 0.9 * max(free["device_peaks"])
    got = assert_matches_reference(graph, keys, 2, scheduler, bucket=BUCKET, capacity=cap,
                                   pinned={0: 1, 3: 0}, hbm_bandwidth=4096.0)
    assert got["placement"][0] == 1 and got["placement"][3] == 0 and not got["feasible"]


def test_single_device_priority_is_the_list_schedule():
    # One stream: every known item is ready by the time the stream is free, so "priority"
    # starts the ready item with the largest priority, exactly the list schedule of §2 / §4.
    for seed in range(3):
        rng, graph = random_case(40 + seed)
        keys = rng.random(graph.chromosome_length(1)).astype(np.float32)
        params = {"hbm_bandwidth": 1024.0, "launch_overhead": 0.25, "bucket": BUCKET}
        dyn = evaluate_graph(graph, keys, 1, scheduler="priority", **params)
        lst = evaluate_graph(graph, keys, 1, **params)
        assert dyn["order"] == lst["order"] and dyn["runtime"] == lst["runtime"]
        assert dyn["device_peaks"] == lst["device_peaks"]
        assert dyn["start"][1:] == dyn["end"][:-1]  # back to back
    # ... so an explicit topological order is reproduced.
    order = [0, 2, 1, 3]
    out = evaluate_order(diamond(), order, scheduler="priority", hbm_bandwidth=1.0)
    assert out["order"] == [op(j) for j in order] and out["runtime"] == 23.0


def test_tens_of_gigabytes_stay_exact():
    rng = np.random.default_rng(21)
    graph = exact_durations(random_computation_graph(50, rng))
    # Sizes up to ~16 GiB, multiples of 1 KiB with < 24 significant bits: exact in float32.
    sizes = np.round(graph.tensor_size / graph.tensor_size.max() * 2**24) * 1024
    graph = graph.replace(tensor_size=sizes, compute_cost=graph.compute_cost * 64)
    keys = rng.random(graph.chromosome_length(2)).astype(np.float32)
    for scheduler in ("priority", "fifo"):
        assert_matches_reference(graph, keys, 2, scheduler, bucket=BUCKET, latency=0.5,
                                 bandwidth=2.0**27, hbm_bandwidth=2.0**30)


# ---------------------------------------------------------------------------------------------
# Padding, batching, compiles, defaults
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("scheduler", ("priority", "fifo"))
def test_padding_invariance(scheduler):
    rng, graph = random_case(7)
    keys = rng.random(graph.chromosome_length(2)).astype(np.float32)
    params = {"latency": 0.5, "bandwidth": 8192.0, "hbm_bandwidth": 4096.0,
              "launch_overhead": 0.25}
    small = evaluate_graph(graph, keys, 2, scheduler=scheduler, **params)
    big = evaluate_graph(graph, keys, 2, scheduler=scheduler, bucket=BUCKET, **params)
    assert bucket_for(graph) != BUCKET
    assert small == big


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_batch_of_different_graphs_equals_one_by_one(scheduler):
    rng = np.random.default_rng(3)
    graphs = [random_case(s)[1] for s in (1, 4, 8)]
    keys = np.stack([pad_keys(rng.random((2, g.chromosome_length(2))), g, BUCKET, 2)
                     for g in graphs])
    params = check_cost_params(0.5, 8192.0, hbm_bandwidth=4096.0)
    batch = evaluate_batch(batch_graphs(graphs, BUCKET), keys, params, num_devices=2,
                           scheduler=scheduler)
    for i, g in enumerate(graphs):
        one = evaluate_population(pad_graph(g, BUCKET), keys[i], params, num_devices=2,
                                  scheduler=scheduler)
        row = jax.tree.map(lambda x, i=i: x[i], batch)
        for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(row)):
            np.testing.assert_array_equal(a, b)


def test_compiles_once_per_bucket_and_mode():
    rng = np.random.default_rng(13)
    bucket = Bucket(32, 64, 128)  # used by no other test
    traces = []
    before = evaluate_population._cache_size()
    for scheduler in ("priority", "fifo"):
        for i, n in enumerate((10, 20, 30)):
            g = random_computation_graph(n, rng)
            keys = pad_keys(rng.random((3, g.chromosome_length(2))), g, bucket, 2)
            # Roofline settings are dynamic: changing them does not recompile.
            params = check_cost_params(0.5, 1e3, 1e9, hbm_bandwidth=[np.inf, 1e3, 1e4][i],
                                       launch_overhead=[0.0, 0.5, 1.0][i])
            evaluate_population(pad_graph(g, bucket), keys, params, num_devices=2,
                                scheduler=scheduler)
            traces.append(evaluate_population._cache_size() - before)
    assert traces == [1, 1, 1, 2, 2, 2]


def test_defaults_are_the_list_scheduler_bit_for_bit():
    rng = np.random.default_rng(17)
    graph = random_computation_graph(40, rng)
    keys = pad_keys(rng.random((8, graph.chromosome_length(2))), graph, BUCKET, 2)
    padded = pad_graph(graph, BUCKET)
    old_style = evaluate_population(padded, keys, CostParams(0.5, 1e4, 1e6), num_devices=2)
    explicit = evaluate_population(
        padded, keys, check_cost_params(0.5, 1e4, 1e6, hbm_bandwidth=np.inf,
                                        launch_overhead=0.0),
        num_devices=2, scheduler="list")
    assert old_style.start is None and explicit.start is None
    for a, b in zip(jax.tree.leaves(old_style), jax.tree.leaves(explicit)):
        assert a.dtype == b.dtype and np.array_equal(a, b)


@pytest.mark.parametrize("scheduler", ["list", "fifo"])
def test_chunk_changes_nothing_and_is_validated(scheduler):
    """``chunk`` (successor entries per loop iteration; None: the decoder's default) only
    changes how the walk is cut up, never a result; anything but an int >= 1 or None is
    refused by name."""
    rng = np.random.default_rng(21)
    g = random_computation_graph(25, rng)
    keys = pad_keys(rng.random((6, g.chromosome_length(2))), g, bucket_for(g), 2)
    padded, params = pad_graph(g), CostParams(0.5, 1e3, 1e9)
    default = evaluate_population(padded, keys, params, num_devices=2, scheduler=scheduler)
    for chunk in (1, 3, 8):
        other = evaluate_population(padded, keys, params, num_devices=2, scheduler=scheduler,
                                    chunk=chunk)
        for a, b in zip(jax.tree.leaves(default), jax.tree.leaves(other)):
            assert np.array_equal(a, b)
    for bad in (0, -2, 2.5, True, "8"):
        with pytest.raises(ValueError, match="chunk must be an int >= 1 or None"):
            evaluate_population(padded, keys, params, num_devices=2, scheduler=scheduler,
                                chunk=bad)


def test_bad_settings_are_rejected():
    g = diamond()
    with pytest.raises(ValueError, match="unknown scheduler 'lifo'"):
        evaluate_graph(g, D1_KEYS, 1, scheduler="lifo")
    with pytest.raises(ValueError, match="unknown scheduler"):
        evaluate_population(pad_graph(g), pad_keys(np.array(D1_KEYS), g, bucket_for(g), 1)[None],
                            num_devices=1, scheduler="Priority")
    with pytest.raises(ValueError, match="hbm_bandwidth must be > 0"):
        check_cost_params(hbm_bandwidth=0.0)
    with pytest.raises(ValueError, match="hbm_bandwidth must be > 0"):
        evaluate_order(g, [0, 1, 2, 3], hbm_bandwidth=float("nan"))
    with pytest.raises(ValueError, match="launch_overhead must be finite"):
        check_cost_params(launch_overhead=-1.0)
    with pytest.raises(ValueError, match="launch_overhead must be finite"):
        evaluate_graph(g, D1_KEYS, 1, launch_overhead=float("inf"))
