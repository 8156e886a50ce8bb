"""The jitted cost model against SPEC §5 and the independent reference (tests/reference_spec.py).

Every random case compares placement and order exactly and peak memory / runtime to 1e-6
relative error (SPEC asks for 1e-5).
"""


import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference_spec as ref

from gsched.core import fixedpoint as fp
from gsched.core.graph import make_graph
from gsched.core.padding import Bucket, batch_graphs, bucket_for, pad_graph, pad_keys
from gsched.costmodel.evaluate import (
    evaluate,
    evaluate_batch,
    evaluate_population,
    evaluate_with_decoder,
    score,
)
from gsched.costmodel.host import (
    evaluate_graph,
    evaluate_order,
    evaluation_to_dict,
    exact_float32_keys,
)
from gsched.costmodel.params import CostParams
from gsched.generators import layered_graph, random_computation_graph
from gsched.methods import optimize
from tests.graphs import MOCCASIN, assert_identical, diamond

WORKED_EXAMPLE = [  # SPEC §5: (D, keys, placement, order, device peaks, runtime)
    (1, [.5] * 4 + [.9, .8, .7, .1] + [.5] * 4, [0, 0, 0, 0],
     [["op", 0], ["op", 1], ["op", 2], ["op", 3]], [14], 10),
    (1, [.5] * 4 + [.9, .7, .8, .1] + [.5] * 4, [0, 0, 0, 0],
     [["op", 0], ["op", 2], ["op", 1], ["op", 3]], [12], 10),
    (2, [.9, .1, .9, .1, .1, .9, .9, .1] + [.9, .8, .7, .1] + [.5, .6, .5, .5, .2, .3, .5, .5],
     [0, 0, 1, 0], [["op", 0], ["op", 1], ["xfer", 0, 1], ["op", 2], ["xfer", 2, 0], ["op", 3]],
     [6, 12], 10),
]


@pytest.mark.parametrize("d, keys, placement, order, peaks, runtime", WORKED_EXAMPLE)
def test_worked_example(d, keys, placement, order, peaks, runtime):
    out = evaluate_graph(diamond(), keys, d)
    assert out["placement"] == placement
    assert out["order"] == order
    assert out["device_peaks"] == peaks
    assert out["peak_memory"] == max(peaks)
    assert out["runtime"] == runtime
    assert out["feasible"]


def float32_keys(rng, graph, d):
    """Keys exactly representable in float32 (so the float64 oracle sees the same ties)."""
    keys = rng.random(graph.chromosome_length(d)).astype(np.float32)
    # Some exact ties, to exercise the tie rules.
    keys[rng.random(keys.shape) < 0.1] = 0.5
    return keys


def assert_matches_reference(graph, keys, d, *, pinned=None, latency=0.0,
                             bandwidth=float("inf"), capacity=None):
    got = evaluate_graph(graph, keys, d, pinned=pinned, latency=latency,
                         bandwidth=bandwidth, capacity=capacity)
    want = ref.decode(graph, [float(k) for k in keys], d, pinned=pinned, latency=latency,
                      bandwidth=bandwidth, capacity=capacity)
    assert_same_as_reference(got, want)
    return got


def assert_same_as_reference(got, want):
    """An evaluation as plain Python (``evaluation_to_dict``) equals the reference's."""
    assert got["placement"] == want["placement"]
    assert [tuple(item) for item in got["order"]] == list(want["order"])
    np.testing.assert_allclose(got["device_peaks"], [float(x) for x in want["device_peaks"]],
                               rtol=1e-6)
    np.testing.assert_allclose(got["runtime"], float(want["runtime"]), rtol=1e-6)
    assert got["feasible"] == want["feasible"]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("d", [1, 2, 3])
def test_random_graphs_match_reference(seed, d):
    rng = np.random.default_rng(seed)
    graph = random_computation_graph(int(rng.integers(5, 60)), rng)
    assert_matches_reference(graph, float32_keys(rng, graph, d), d,
                             latency=float(rng.choice([0.0, 0.5])),
                             bandwidth=float(rng.choice([np.inf, 1e4])))


@pytest.mark.parametrize("seed", range(3))
def test_layered_graphs_single_device_match_reference(seed):
    rng = np.random.default_rng(100 + seed)
    graph = layered_graph(60, rng)
    assert_matches_reference(graph, float32_keys(rng, graph, 1), 1)


def test_capacity_and_pinning_match_reference():
    rng = np.random.default_rng(7)
    graph = random_computation_graph(30, rng)
    keys = float32_keys(rng, graph, 2)
    free = evaluate_graph(graph, keys, 2)
    cap = 0.9 * max(free["device_peaks"])
    out = assert_matches_reference(graph, keys, 2, capacity=cap, pinned={0: 1, 3: 0})
    assert out["placement"][0] == 1 and out["placement"][3] == 0
    loose = assert_matches_reference(graph, keys, 2, capacity=1e30)
    assert loose["feasible"]


def test_orders_are_topological_in_the_extended_graph():
    rng = np.random.default_rng(3)
    for _ in range(5):
        graph = random_computation_graph(40, rng)
        keys = float32_keys(rng, graph, 3)
        out = evaluate_graph(graph, keys, 3)
        # The reference rejects any order that is not a topological order of ops ∪ transfers
        # or that misses / adds a transfer.
        ref.evaluate_order(graph, out["placement"], out["order"], 3)


def test_single_device_ignores_affinities_and_transfer_keys():
    rng = np.random.default_rng(5)
    graph = random_computation_graph(40, rng)
    keys = float32_keys(rng, graph, 1)
    other = keys.copy()
    n = graph.num_ops
    other[:n] = rng.random(n)
    other[2 * n:] = rng.random(graph.num_tensors)
    assert evaluate_graph(graph, keys, 1) == evaluate_graph(graph, other, 1)


def test_multi_output_control_and_parallel_edges_by_hand():
    # p has two outputs t0 (8 B) and t1 (2 B), both read by c (parallel GNN edges), and a
    # control dependency t2 (0 B) to q; c and q run on device 1, p on device 0.
    graph = make_graph(compute_cost=[1, 1, 1], temporary_memory=[0, 0, 0],
                       tensor_producer=[0, 0, 0], tensor_size=[8, 2, 0],
                       tensor_is_control=[False, False, True],
                       edge_tensor=[0, 1, 2], edge_consumer=[1, 1, 2])
    d = 2
    keys = np.zeros(graph.chromosome_length(d), np.float32)
    keys[0:6] = [1, 0, 0, 1, 0, 1]  # p → 0, c → 1, q → 1
    keys[6:9] = [0.9, 0.5, 0.6]  # priorities p, c, q
    keys[9:] = [0.3, 0.3, 0.3, 0.2, 0.3, 0.1]  # X(t0,1)=.3, X(t1,1)=.2, X(t2,1)=.1
    out = evaluate_graph(graph, keys, d)
    # After p, the three transfers are ready: X(t0,1) (.3), then X(t1,1) (.2); now c is
    # ready and outranks X(t2,1) (.5 > .1); q waits for X(t2,1).
    assert out["order"] == [["op", 0], ["xfer", 0, 1], ["xfer", 1, 1], ["op", 1],
                            ["xfer", 2, 1], ["op", 2]]
    # Device 0: p's step holds t0 + t1 = 10 (t2 is 0); freed after the transfers.
    # Device 1: X(t0) 8, X(t1) 8 + 2 = 10, c 10 + 0 (no outputs), then only t2's 0.
    assert out["device_peaks"] == [10, 10]
    # Runtime: p 0–1; transfers take 0 (infinite bandwidth); c 1–2; X(t2,1) waits for
    # device 1 (busy until 2): 2–2; q 2–3.
    assert out["runtime"] == 3
    assert_matches_reference(graph, keys, d)
    # With latency 1 each transfer keeps both devices busy for 1: X(t0) 1–2, X(t1) 2–3,
    # c 3–4, X(t2) 4–5, q 5–6.
    assert evaluate_graph(graph, keys, d, latency=1.0)["runtime"] == 6


def test_padding_invariance():
    rng = np.random.default_rng(11)
    graph = random_computation_graph(37, rng)
    small, big = bucket_for(graph), Bucket(128, 256, 256)
    for d in (1, 2):
        keys = float32_keys(rng, graph, d)
        assert (evaluate_graph(graph, keys, d, bucket=small)
                == evaluate_graph(graph, keys, d, bucket=big))


def test_batch_of_different_graphs_equals_one_by_one():
    rng = np.random.default_rng(12)
    graphs = [random_computation_graph(n, rng) for n in (9, 30, 17)]
    bucket = bucket_for(graphs)
    d, p = 2, 4
    keys = np.stack([np.stack([pad_keys(float32_keys(rng, g, d), g, bucket, d)
                               for _ in range(p)]) for g in graphs])
    batched = evaluate_batch(batch_graphs(graphs, bucket), keys, num_devices=d)
    for b, g in enumerate(graphs):
        single = evaluate_population(pad_graph(g, bucket), keys[b], num_devices=d)
        for field in ("placement", "order", "device_peaks", "runtime", "feasible"):
            np.testing.assert_array_equal(getattr(batched, field)[b], getattr(single, field))


def test_unbatched_evaluate_is_traceable_and_agrees():
    graph = diamond()
    keys = jnp.asarray(pad_keys(np.asarray(WORKED_EXAMPLE[2][1], np.float32), graph,
                                bucket_for(graph), 2))
    one = jax.jit(lambda k: evaluate(pad_graph(graph), k, num_devices=2))(keys)
    assert float(one.peak_memory) == 12 and float(one.runtime) == 10


@pytest.mark.parametrize("d", [1, 2])
def test_scores_do_not_depend_on_what_jit_closes_over(d):
    # XLA divides by a broadcast scalar with its reciprocal (one ulp off) unless both are
    # constants: closing over the graph and the parameters used to change runtimes by an ulp.
    rng = np.random.default_rng(15)
    graph = random_computation_graph(50, rng)
    padded = pad_graph(graph)
    params = CostParams(latency=0.1, bandwidth=1000.0, capacity=1e9, hbm_bandwidth=3e4,
                        launch_overhead=0.01)
    keys = jnp.asarray(np.stack([pad_keys(float32_keys(rng, graph, d), graph, padded.bucket, d)
                                 for _ in range(8)]))
    passed = evaluate_population(padded, keys, params, num_devices=d)
    closed = jax.jit(lambda k: evaluate(padded, k, params, num_devices=d))
    for i in range(len(keys)):  # every field, floats bit for bit (runtime, runtime_bound)
        assert_identical(jax.tree.map(lambda x: x[i], passed), closed(keys[i]))


def test_compiles_once_per_bucket():
    rng = np.random.default_rng(13)
    bucket = Bucket(64, 128, 128)
    before = evaluate_population._cache_size()
    for n in (20, 33, 50):
        g = random_computation_graph(n, rng)
        keys = pad_keys(rng.random((3, g.chromosome_length(2))), g, bucket, 2)
        evaluate_population(pad_graph(g, bucket), keys, CostParams(0.0, 1e3, 1e9),
                            num_devices=2)
    assert evaluate_population._cache_size() - before == 1


def test_precision_with_tens_of_gigabytes():
    # Float32 prefix sums would be off by far more than 1e-5 here.
    rng = np.random.default_rng(14)
    base = random_computation_graph(300, rng)
    sizes = np.where(base.tensor_is_control, 0,
                     rng.integers(1, 40_000_000_000, base.num_tensors)).astype(np.float64)
    sizes[::7] = rng.integers(1, 1000, sizes[::7].shape)  # tiny tensors beside huge ones
    graph = base.replace(tensor_size=np.where(base.tensor_is_control, 0.0, sizes),
                         compute_cost=rng.random(base.num_ops) * 1e6 + 1e-3)
    for d in (1, 2):
        keys = float32_keys(rng, graph, d)
        got = evaluate_graph(graph, keys, d, latency=3.0, bandwidth=1e9)
        want = ref.decode(graph, [float(k) for k in keys], d, latency=3.0, bandwidth=1e9)
        assert got["order"] == [list(x) for x in want["order"]]
        for g, w in zip(got["device_peaks"], want["device_peaks_exact"]):
            assert abs(g - float(w)) <= 1e-5 * float(w)
        assert abs(got["runtime"] - float(want["runtime_exact"])) <= 1e-5 * float(
            want["runtime_exact"])
        # Every memory walk (the loop's, the dense decodes') sums the same integers.
        bucket = bucket_for(graph)
        padded, batch = pad_graph(graph, bucket), pad_keys(keys[None], graph, bucket, d)
        peaks = [evaluate_with_decoder(padded, batch, CostParams(3.0, 1e9), num_devices=d,
                                       decoder=decoder).device_peaks
                 for decoder in ("loop", "dense")]
        np.testing.assert_array_equal(peaks[0], peaks[1])
        np.testing.assert_array_equal(peaks[0][0], got["device_peaks"])


@pytest.mark.parametrize("lo_bits", [12, 24])
def test_fixed_point_int64_round_trip(lo_bits):
    rng = np.random.default_rng(17)
    hi = np.concatenate([[0, 1, 2**31 - 1], rng.integers(0, 2**31, 61)]).astype(np.int32)
    lo = np.concatenate([[0, 2**lo_bits - 1, 2**lo_bits - 1],
                         rng.integers(0, 2**lo_bits, 61)]).astype(np.int32)

    def round_trip(hi, lo):
        with jax.enable_x64(True):
            value = fp.to_int64(fp.Fixed(hi, lo), lo_bits)
            return value, fp.from_int64(value, lo_bits)

    value, back = jax.jit(round_trip)(hi, lo)
    np.testing.assert_array_equal(np.asarray(value),
                                  hi.astype(np.int64) * 2**lo_bits + lo.astype(np.int64))
    np.testing.assert_array_equal(back.hi, hi)
    np.testing.assert_array_equal(back.lo, lo)


def test_float64_keys_keep_their_order():
    graph = diamond()
    keys = np.array([.5] * 4 + [.9, .7 + 1e-12, .7, .1] + [.5] * 4)  # ties in float32
    assert evaluate_graph(graph, keys, 1)["order"][1] == ["op", 1]
    mapped = exact_float32_keys(keys)
    assert mapped[5] > mapped[6]


@pytest.mark.parametrize("v", [1, 2, 37, 1536, 70_000])
def test_rank_items_is_spec_2s_order(v):
    """Priority descending, ties by index, ``first`` items before all (by index), on keys
    with exact ties, 0, −0.0, 1 and the smallest subnormal; sizes past 2**16 items too."""
    from gsched.costmodel.schedule import rank_items

    rng = np.random.default_rng(v)
    pool = np.array([0.0, -0.0, 1.0, 0.5, np.float32(1e-45), 0.25], np.float32)
    priority = np.where(rng.random(v) < 0.3, rng.choice(pool, v),
                        rng.random(v).astype(np.float32))
    first = rng.random(v) < 0.1
    rank, item_at_rank = jax.jit(rank_items)(priority, first)
    want = np.lexsort((np.arange(v), np.where(first, 0.0, -priority.astype(np.float64)), ~first))
    np.testing.assert_array_equal(item_at_rank, want)
    np.testing.assert_array_equal(np.asarray(rank)[want], np.arange(v))


@pytest.mark.parametrize("d", [1, 2])
def test_subnormal_keys_compare_exactly(d):
    """Keys below float32's smallest normal (1.2e-38) order like their values on every
    decoder, as in the reference: XLA:CPU compares floats with subnormals flushed to zero."""
    rng = np.random.default_rng(40 + d)
    graph = random_computation_graph(30, rng)
    pool = np.array([0.0, -0.0, 1e-45, 3e-42, 1e-40, 1e-39, 2e-38], np.float32)
    keys = rng.choice(pool, graph.chromosome_length(d))
    assert_matches_reference(graph, keys, d, latency=0.5, bandwidth=1e4)
    bucket = bucket_for(graph)
    padded = jnp.asarray(pad_keys(keys, graph, bucket, d))[None]
    evaluations = [evaluate_with_decoder(pad_graph(graph, bucket), padded, CostParams(),
                                         num_devices=d, decoder=decoder)
                   for decoder in ("loop", "dense", "pallas")]
    for other in evaluations[1:]:
        assert_identical(evaluations[0], other)


def test_score_ranks_feasible_before_infeasible():
    rng = np.random.default_rng(15)
    graph = random_computation_graph(40, rng)
    padded, bucket = pad_graph(graph), bucket_for(graph)
    keys = pad_keys(rng.random((64, graph.chromosome_length(2))), graph, bucket, 2)
    free = evaluate_population(padded, keys, num_devices=2)
    capacity = float(np.median(np.asarray(free.peak_memory)))
    params = CostParams(0.0, float("inf"), capacity)
    ev = evaluate_population(padded, keys, params, num_devices=2)
    s = np.asarray(score(ev, "runtime", params))
    feasible = np.asarray(ev.feasible)
    assert feasible.any() and (~feasible).any()
    assert s[feasible].max() < s[~feasible].min()
    np.testing.assert_array_equal(s[feasible], np.asarray(ev.runtime)[feasible])
    excess = np.asarray(ev.excess)[~feasible]
    assert np.all(np.diff(s[~feasible][np.argsort(excess)]) >= 0)
    with pytest.raises(ValueError, match="unknown objective"):
        score(ev, "latency", params)


def test_evaluate_order_scores_explicit_orders():
    graph = diamond()
    assert evaluate_order(graph, [0, 2, 1, 3])["device_peaks"] == [12]
    out = evaluate_order(graph, [0, 1, 2, 3], [0, 0, 1, 0], 2)
    # Transfers run right after their producer: a X(t0,1) b c X(t2,0) d.
    assert out["order"] == [["op", 0], ["xfer", 0, 1], ["op", 1], ["op", 2], ["xfer", 2, 0],
                            ["op", 3]]
    ref.evaluate_order(graph, out["placement"], out["order"], 2)
    with pytest.raises(ValueError, match="not topological"):
        evaluate_order(graph, [1, 0, 2, 3])
    with pytest.raises(ValueError, match="permutation"):
        evaluate_order(graph, [0, 1, 2])


@pytest.mark.parametrize("keys, match", [
    (np.full(11, 0.5), "expected \\(12,\\)"),
    (np.array([0.5] * 11 + [np.nan]), "finite"),
    (np.array([0.5] * 11 + [1.5]), "in \\[0, 1\\]"),
    (np.full((2, 6), 0.5), "shape"),
])
def test_bad_chromosomes_are_rejected(keys, match):
    with pytest.raises(ValueError, match=match):
        evaluate_graph(diamond(), keys, 1)


def test_bad_settings_and_oversized_graphs_are_rejected():
    keys = np.full(12, 0.5)
    with pytest.raises(ValueError, match="bandwidth"):
        evaluate_graph(diamond(), keys, 1, bandwidth=0.0)
    with pytest.raises(ValueError, match="latency"):
        evaluate_graph(diamond(), keys, 1, latency=-1.0)
    with pytest.raises(ValueError, match="capacity"):
        evaluate_graph(diamond(), keys, 1, capacity=float("nan"))
    with pytest.raises(ValueError, match="more than the padding bucket"):
        pad_graph(random_computation_graph(40, 0), Bucket(32, 64, 64))


@pytest.mark.parametrize("what, kwargs", [
    ("tensor size", {"tensor_size": np.array([2.0, 1e-40, 5.0, 2.0])}),
    ("temporary memory", {"temporary_memory": np.array([0.0, 0.0, 3e-39, 0.0])}),
    ("compute cost", {"compute_cost": np.array([2.0, 1e-45, 4.0, 1.0])}),
])
def test_values_below_float32_normal_range_are_rejected(what, kwargs):
    # XLA:CPU flushes them to zero; the reference would not.
    with pytest.raises(ValueError, match=f"{what} .* below float32's smallest normal"):
        evaluate_graph(diamond().replace(**kwargs), np.full(12, 0.5), 1)


@pytest.mark.parametrize("setting", ["latency", "bandwidth", "hbm_bandwidth",
                                     "launch_overhead"])
def test_settings_below_float32_normal_range_are_rejected(setting):
    with pytest.raises(ValueError, match=f"{setting} .* below float32's smallest normal"):
        evaluate_graph(diamond(), np.full(20, 0.5), 2, **{setting: 1e-40})


OVERFLOW = "durations may sum to .* beyond what the float32"


@pytest.mark.parametrize("setting, value, match", [
    ("latency", 3e38, OVERFLOW), ("launch_overhead", 2e38, OVERFLOW),
    ("hbm_bandwidth", 2e-38, OVERFLOW), ("bandwidth", 1e-30, OVERFLOW),
    ("bandwidth", 1e38, "durations may sum to .* below what the float32 cost model keeps exact"),
    ("hbm_bandwidth", 3e38, "durations may sum to .* below what the float32 cost model keeps")])
def test_durations_outside_float32_are_rejected_on_the_host(setting, value, match):
    graph = diamond()
    if value > 1:  # tiny durations: small tensors over a huge bandwidth, no compute
        graph = graph.replace(tensor_size=graph.tensor_size * 1e-20, compute_cost=np.zeros(4))
    with pytest.raises(ValueError, match=match):
        evaluate_graph(graph, np.full(20, 0.5), 2, **{setting: value})
    with pytest.raises(ValueError, match=match):
        optimize("random", [graph], num_devices=2, budget=4,
                 cost_params=CostParams(**{setting: value}))


def test_totals_near_float32_floor_are_rejected_and_tiny_parts_of_larger_totals_round():
    # Units are normal floats (>= 2**-126): totals near that floor would keep a few bits.
    near = diamond().replace(compute_cost=np.array([3e-38, 5e-38, 2e-38, 1e-38]))
    with pytest.raises(ValueError, match="durations may sum to .* below what the float32"):
        evaluate_graph(near, np.full(12, 0.5), 1)
    with pytest.raises(ValueError, match="total tensor size is .* below what the float32"):
        pad_graph(diamond().replace(tensor_size=np.full(4, 1.4e-38)), bucket_for(diamond()))
    # A transfer of 1e-39 beside compute of 1 rounds to 0, as in float32 arithmetic.
    graph = diamond().replace(compute_cost=np.ones(4), tensor_size=np.full(4, 1e-30),
                              temporary_memory=np.zeros(4))
    assert_matches_reference(graph, np.float32(WORKED_EXAMPLE[2][1]), 2, bandwidth=1e9)


@pytest.mark.parametrize("scale, size_scale, setting", [
    (1e-27, 1e-28, {}), (0.0, 1.0, {"bandwidth": 1e30}), (1e-30, 1e-28, {"latency": 2e-37})])
def test_tiny_durations_and_sizes_match_reference(scale, size_scale, setting):
    # Sums below 2**-79 used to give a subnormal time unit, flushed to 0 on the CPU: garbage
    # times, and the dense decode's packed rows then dropped items (fixedpoint.choose_unit).
    graph = diamond()
    graph = graph.replace(compute_cost=graph.compute_cost * scale,
                          tensor_size=graph.tensor_size * size_scale,
                          temporary_memory=graph.temporary_memory * size_scale)
    keys = WORKED_EXAMPLE[2][1]
    got = assert_matches_reference(graph, np.float32(keys), 2, capacity=0.0, **setting)
    assert not got["feasible"] and got["runtime"] >= 0
    bucket = bucket_for(graph)
    padded, batch = pad_graph(graph, bucket), pad_keys(np.float32(keys)[None], graph, bucket, 2)
    params = CostParams(**setting)
    loop = evaluate_with_decoder(padded, batch, params, num_devices=2, decoder="loop")
    for decoder in ("dense", "pallas", "pallas_memory", "pallas_lanes", "pallas_fused",
                    "pallas_lanes_fused", "pallas_tpu"):
        assert_identical(evaluate_with_decoder(padded, batch, params, num_devices=2,
                                               decoder=decoder), loop)


@pytest.mark.parametrize("scheduler, decoders", [("list", ("loop", "dense", "pallas")),
                                                 ("priority", ("loop", "pallas"))])
def test_durations_past_float32_give_infinite_runtime_and_the_same_order(scheduler, decoders):
    # The jitted entry points take CostParams unchecked: a sum of durations past float32 has
    # no time unit; the runtime is +inf and the list schedule's order (independent of times)
    # is unchanged.
    rng = np.random.default_rng(18)
    graph = random_computation_graph(30, rng)
    bucket = bucket_for(graph)
    padded = pad_graph(graph, bucket)
    batch = pad_keys(np.stack([float32_keys(rng, graph, 2) for _ in range(3)]), graph, bucket, 2)
    ordinary = evaluate_with_decoder(padded, batch, CostParams(latency=1.0), num_devices=2,
                                     decoder="loop", scheduler=scheduler)
    for decoder in decoders:
        ev = evaluate_with_decoder(padded, batch, CostParams(latency=3e38), num_devices=2,
                                   decoder=decoder, scheduler=scheduler)
        assert np.all(np.isinf(ev.runtime)) and not np.any(np.isfinite(ev.runtime_bound))
        if scheduler == "list":
            np.testing.assert_array_equal(ev.order, ordinary.order)
            np.testing.assert_array_equal(ev.device_peaks, ordinary.device_peaks)
        else:
            ran = np.asarray(ev.start) >= 0
            assert np.all(np.isinf(np.asarray(ev.start)[ran]))


@pytest.mark.skipif(not MOCCASIN.exists(), reason="no ../shared")
@pytest.mark.parametrize("name", ["VGG16_256_224_224_3_train_nx.json",
                                  "random_layered_n100_w0.27_nlv0.75_ed0.2_scd0.14.json"])
def test_moccasin_graphs_match_reference(name):
    from gsched.formats import load_graph

    graph = load_graph(MOCCASIN / name)
    rng = np.random.default_rng(16)
    for d in (1, 2):
        assert_matches_reference(graph, float32_keys(rng, graph, d), d)


@pytest.mark.slow
@pytest.mark.skipif(not MOCCASIN.exists(), reason="no ../shared")
def test_every_decoder_matches_reference_on_moccasin_graphs():
    """Every moccasin graph up to 500 ops, D = 1, 2, 3, with latency and bandwidth: the loop,
    the dense decodes and the three list kernels (interpreted) equal the reference (~13 min,
    2 cores)."""
    from gsched.formats import load_graph

    params = CostParams(latency=0.5, bandwidth=1e4)
    for path in sorted(MOCCASIN.glob("*.json")):
        graph = load_graph(path)
        if graph.num_ops > 500:
            continue
        jax.clear_caches()  # a process compiling every bucket × decoder runs out of memory
        rng = np.random.default_rng(zlib.crc32(path.name.encode()))
        bucket = bucket_for(graph)
        padded = pad_graph(graph, bucket)
        for d in (1, 2, 3):
            keys = [float32_keys(rng, graph, d) for _ in range(2)]
            wants = [ref.decode(graph, [float(x) for x in k], d, latency=params.latency,
                                bandwidth=params.bandwidth) for k in keys]
            batch = jnp.asarray(np.stack([pad_keys(k, graph, bucket, d) for k in keys]))
            for decoder in ("loop", "dense", "pallas", "pallas_memory", "pallas_lanes",
                            "pallas_fused", "pallas_lanes_fused", "pallas_tpu"):
                ev = evaluate_with_decoder(padded, batch, params, num_devices=d,
                                           decoder=decoder)
                for i, want in enumerate(wants):
                    got = evaluation_to_dict(jax.tree.map(lambda x, i=i: x[i], ev), graph,
                                             bucket, d)
                    assert_same_as_reference(got, want)


def test_ordered_sum_rounds_the_same_however_compiled():
    x = np.random.default_rng(16).random((6, 37)).astype(np.float32) * 1e3
    want = np.pad(x, [(0, 0), (0, 64 - 37)])  # pairwise, zero-padded to a power of two
    while want.shape[1] > 1:
        want = want[:, :want.shape[1] // 2] + want[:, want.shape[1] // 2:]
    rows = [jax.jit(lambda: fp.ordered_sum(jnp.asarray(row)))() for row in x]  # folded
    batched = jax.jit(jax.vmap(fp.ordered_sum))(x)
    for got in (np.asarray(rows), np.asarray(batched), np.asarray(fp.ordered_sum(x))):
        np.testing.assert_array_equal(got.view(np.int32), want[:, 0].view(np.int32))
