"""Tests of the slow reference of SPEC §1 program inputs + §8 (tests/reference_exec.py).

Every hand-made expectation below is worked out on paper in the comments. Random tests check
the oracle against the independent §2–§4 oracle (tests/reference_spec.py) and against
properties that the SPEC's words imply (and that a wrong implementation would break).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction as F

import numpy as np
import pytest

from gsched import layered_graph, load_graph, make_graph, random_computation_graph
from tests import reference_exec as rx
from tests import reference_spec
from tests.graphs import SHARED_DIAMOND
from tests.graphs import diamond as diamond_graph

DIAMOND_FILE = SHARED_DIAMOND

A, B, C, D_ = 0, 1, 2, 3  # diamond op indices


def op(j):
    return ("op", j)


def xf(t, d):
    return ("xfer", t, d)


@pytest.fixture(params=["code", "file"])
def diamond(request):
    if request.param == "code":
        return diamond_graph()
    if not DIAMOND_FILE.exists():
        pytest.skip(f"this test needs ../shared (the SPEC's shared folder): {DIAMOND_FILE} "
                    "is missing")
    return load_graph(DIAMOND_FILE)


# §5 / §8.4 chromosomes.
D1_KEYS = [.5] * 4 + [.9, .8, .7, .1] + [.5] * 4
D1_FUSION = [0, .9, .6, 0]
D2_KEYS = [.9, .1, .9, .1, .1, .9, .9, .1] + [.9, .8, .7, .1] + [.5, .6, .5, .5, .2, .3, .5, .5]


def groups_of(result):
    return sorted(sorted(m) for m in result["groups"].values())


# ---------------------------------------------------------------------------------------------
# SPEC §8.4 worked examples, all five rows (code-built diamond and the shared file)
# ---------------------------------------------------------------------------------------------

def test_diamond_file_matches_code_built_diamond():
    if not DIAMOND_FILE.exists():
        pytest.skip(f"this test needs ../shared: {DIAMOND_FILE} is missing")
    g, h = load_graph(DIAMOND_FILE), diamond_graph()
    for field in ("compute_cost", "temporary_memory", "tensor_producer", "tensor_size",
                  "edge_tensor", "edge_consumer"):
        assert np.array_equal(getattr(g, field), getattr(h, field)), field


def test_row1_fusion_groups_bcd(diamond):
    # Candidates: b (key .9, only consumer d, same device), c (.6, only consumer d); a has key
    # 0, d has a graph output. b merges into {d}, then c into {b,d}: internal t1+t2 = 5 B.
    # Kernel G = d: inputs {t0}, outputs {t3}, cost 3+4+1 = 8, temp 5.
    # a: 0+4 = 4 | G: 4 + 1 + 5 = 10 (t0, t3 freed). Runtime 2 + 8 = 10.
    r = rx.evaluate(diamond, D1_KEYS + D1_FUSION, 1, fusion=True)
    assert groups_of(r) == [[A], [B, C, D_]]
    assert r["fusion"] == [A, D_, D_, D_]
    assert r["order"] == [op(A), op(D_)]
    assert r["device_peaks_exact"] == [10] and r["device_peaks"] == [10.0]
    assert r["peak_memory"] == 10.0
    assert r["runtime_exact"] == 10 and r["runtime"] == 10.0
    assert r["times_exact"] == {op(A): (0, 2), op(D_): (2, 10)}


def test_row2_fusion_hbm_bandwidth_1(diamond):
    # a: max(2, 4/1) = 4; G: max(8, (4 + 1)/1) = 8 → runtime 12; memory unchanged.
    r = rx.evaluate(diamond, D1_KEYS + D1_FUSION, 1, fusion=True, hbm_bandwidth=1)
    assert groups_of(r) == [[A], [B, C, D_]]
    assert r["order"] == [op(A), op(D_)]
    assert r["device_peaks_exact"] == [10]
    assert r["durations_exact"] == {op(A): 4, op(D_): 8}
    assert r["runtime_exact"] == 12


def test_row3_no_fusion_hbm_bandwidth_1(diamond):
    # a: max(2, 4) = 4; b: max(3, 4+2) = 6; c: max(4, 4+3) = 7; d: max(1, 2+3+1) = 6 → 23.
    r = rx.evaluate(diamond, D1_KEYS, 1, hbm_bandwidth=1)
    assert r["fusion"] == [A, B, C, D_]
    assert r["order"] == [op(A), op(B), op(C), op(D_)]
    assert r["device_peaks_exact"] == [14]
    assert r["durations_exact"] == {op(A): 4, op(B): 6, op(C): 7, op(D_): 6}
    assert r["runtime_exact"] == 23


def test_row4_fusion_capacity_4(diamond):
    # b into {d}: internal t1 = 2 ≤ 4 → {b,d}. c into {b,d}: internal t1+t2 = 5 > 4 → skip.
    # G' = d: inputs {t0, t2}, outputs {t3}, cost 3+1 = 4, temp 0, priority .1 (d's).
    # Order: a (.9); then c (.7) — G' waits for t2; then G'.
    # a: 4 | c: 4+3+5 = 12 | G': 4+3+1 = 8 → peak 12. Runtime 2 + 4 + 4 = 10.
    r = rx.evaluate(diamond, D1_KEYS + D1_FUSION, 1, fusion=True, fusion_capacity=4)
    assert groups_of(r) == [[A], [B, D_], [C]]
    assert r["fusion"] == [A, D_, C, D_]
    assert r["order"] == [op(A), op(C), op(D_)]
    assert r["device_peaks_exact"] == [12]
    assert r["runtime_exact"] == 10


def test_row5_two_devices_priority_scheduler(diamond):
    # Placement [0,0,1,0]. a 0–2. Then b (comp0, ready 2) and X(t0,1) (copy1, ready 2) both
    # start at 2: compute first → b 2–5, then X(t0,1) 2–2 (asynchronous, 0 s), c 2–6 on
    # device 1, X(t2,0) 6–6, d starts at max(5, 6) = 6 → 7. Same order as §5 → same peaks.
    r = rx.evaluate(diamond, D2_KEYS, 2, scheduler="priority")
    assert r["placement"] == [0, 0, 1, 0]
    assert r["order"] == [op(A), op(B), xf(0, 1), op(C), xf(2, 0), op(D_)]
    assert r["device_peaks_exact"] == [6, 12]
    assert r["runtime_exact"] == 7
    assert r["times_exact"] == {op(A): (0, 2), op(B): (2, 5), xf(0, 1): (2, 2),
                                op(C): (2, 6), xf(2, 0): (6, 6), op(D_): (6, 7)}
    assert r["times"][op(D_)] == (6.0, 7.0)


def test_spec5_rows_with_defaults_equal_reference_spec(diamond):
    for keys, d in [(D1_KEYS, 1), ([.5] * 4 + [.9, .7, .8, .1] + [.5] * 4, 1), (D2_KEYS, 2)]:
        assert_same_as_decode(rx.evaluate(diamond, keys, d),
                              reference_spec.decode(diamond, keys, d))


def test_launch_overhead_applies_to_kernels_not_transfers(diamond):
    # D=1 unfused: 10 + 4·0.5 = 12; fused (2 kernels): 10 + 2·0.5 = 11.
    assert rx.evaluate(diamond, D1_KEYS, 1, launch_overhead=.5)["runtime_exact"] == 12
    r = rx.evaluate(diamond, D1_KEYS + D1_FUSION, 1, fusion=True, launch_overhead=.5)
    assert r["runtime_exact"] == 11
    # Row 5 with overhead 1 and latency 0.25: a 0–3; b 3–7; X(t0,1) 3–3.25; c 3.25–8.25;
    # X(t2,0) 8.25–8.5; d max(7, 8.5) = 8.5 → 10.5. Transfers get latency, no overhead.
    r = rx.evaluate(diamond, D2_KEYS, 2, scheduler="priority", launch_overhead=1, latency=.25)
    assert r["times_exact"] == {op(A): (0, 3), op(B): (3, 7), xf(0, 1): (3, F(13, 4)),
                                op(C): (F(13, 4), F(33, 4)), xf(2, 0): (F(33, 4), F(34, 4)),
                                op(D_): (F(34, 4), F(42, 4))}


def test_capacity_with_fusion(diamond):
    keys = D1_KEYS + D1_FUSION
    assert rx.evaluate(diamond, keys, 1, fusion=True, capacity=10)["feasible"] is True
    r = rx.evaluate(diamond, keys, 1, fusion=True, capacity=9)
    assert r["feasible"] is False and r["device_excess_exact"] == [1]
    assert rx.evaluate(diamond, keys, 1, fusion=True, capacity=math.inf)["feasible"] is True


# ---------------------------------------------------------------------------------------------
# Defaults = §2–§4 (tests/reference_spec.py) on random graphs
# ---------------------------------------------------------------------------------------------

def assert_same_as_decode(r, ref):
    assert r["placement"] == ref["placement"]
    assert r["order"] == ref["order"]
    assert r["device_peaks_exact"] == ref["device_peaks_exact"]
    assert r["peak_memory_exact"] == ref["peak_memory_exact"]
    assert r["runtime_exact"] == ref["runtime_exact"]
    assert r["times_exact"] == ref["times_exact"]
    assert r["feasible"] == ref["feasible"]
    assert r["device_excess_exact"] == ref["device_excess_exact"]
    assert r["step_usage"] == ref["step_usage"]
    assert r["device_peaks"] == ref["device_peaks"] and r["runtime"] == ref["runtime"]


def random_graphs(count, seed):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        n = int(rng.integers(5, 31))
        if i % 3 == 2:
            out.append(layered_graph(n, rng))
        else:
            out.append(random_computation_graph(n, rng))
    return out


def base_len(g, d):
    return g.num_ops * d + g.num_ops + g.num_tensors * d


def test_defaults_equal_reference_spec_decode_on_random_graphs():
    rng = np.random.default_rng(1)
    for i, g in enumerate(random_graphs(50, 2)):
        d = 1 + i % 3
        keys = rng.random(base_len(g, d))
        if i % 5 == 4:  # exact key ties exercise the tie rules
            keys = np.round(keys * 4) / 4
        kw = {}
        if i % 2:
            size = float(np.max(g.tensor_size, initial=1.0))
            kw = {"latency": float(rng.random()), "bandwidth": size * float(rng.random() + .1),
                      "capacity": float(rng.random()) * 4 * size}
        pinned = {0: d - 1} if i % 4 == 3 else None
        ref = reference_spec.decode(g, keys, d, pinned=pinned, **kw)
        assert_same_as_decode(rx.evaluate(g, keys, d, pinned=pinned, **kw), ref)
        # Fusion on but every fusion key < 0.5: still exactly §2–§4.
        fused = rx.evaluate(g, np.concatenate([keys, rng.random(g.num_ops) * .499]), d,
                            fusion=True, pinned=pinned, **kw)
        assert_same_as_decode(fused, ref)
        assert fused["fusion"] == list(range(g.num_ops))


# ---------------------------------------------------------------------------------------------
# §1 program inputs
# ---------------------------------------------------------------------------------------------

def inputs_graph():
    # Ops: 0 x (source, prio .9), 1 w1 (input), 2 y reads x, w1, w3; 3 w3 (input);
    # 4 z (source, prio .95). Tensors: t0 x→y (1), t1 w1→y (2), t2 y out (1), t3 w3→y (4),
    # t4 z out (8).
    return make_graph(compute_cost=[1, 1, 1, 1, 1], temporary_memory=[0, 0, 0, 0, 0],
                      tensor_producer=[0, 1, 2, 3, 4], tensor_size=[1, 2, 1, 4, 8],
                      edge_tensor=[0, 1, 3], edge_consumer=[2, 2, 2])


INPUTS_PRIO = [.9, .1, .5, .05, .95]


def test_list_scheduler_runs_inputs_first_in_index_order():
    g = inputs_graph()
    keys = [.5] * 5 + INPUTS_PRIO + [.5] * 5
    # Without inputs: z (.95), x (.9), w1 (.1), w3 (.05), then y (.5) once ready.
    assert rx.evaluate(g, keys, 1)["order"] == [op(4), op(0), op(1), op(3), op(2)]
    # Inputs {1, 3}: w1, w3 first (index order, despite priorities .1, .05), then z, x, y.
    r = rx.evaluate(g, keys, 1, inputs=[3, 1])
    assert r["inputs"] == [1, 3]
    assert r["order"] == [op(1), op(3), op(4), op(0), op(2)]
    # Memory: w1 2 | w3 2+4 = 6 | z 6+8 = 14 (t4 freed) | x 6+1 = 7 | y 7+1 = 8 → 14.
    assert r["device_peaks_exact"] == [14]
    # A bool mask gives the same.
    mask = np.array([False, True, False, True, False])
    assert rx.evaluate(g, keys, 1, inputs=mask)["order"] == r["order"]


def test_inputs_from_graph_attribute_and_explicit_override():
    g = inputs_graph()
    keys = [.5] * 5 + INPUTS_PRIO + [.5] * 5
    # Simulates the coming Graph.is_input field (bool [N]).
    object.__setattr__(g, "is_input", np.array([False, True, False, True, False]))
    assert rx.evaluate(g, keys, 1)["order"] == [op(1), op(3), op(4), op(0), op(2)]
    # An explicit (empty) list overrides the attribute.
    assert rx.evaluate(g, keys, 1, inputs=[])["order"] == [op(4), op(0), op(1), op(3), op(2)]


def test_input_that_reads_a_tensor_is_rejected():
    g = inputs_graph()
    keys = [.5] * 5 + INPUTS_PRIO + [.5] * 5
    with pytest.raises(ValueError, match=r"op 2 .*program input.*reads tensor 0"):
        rx.evaluate(g, keys, 1, inputs=[2])
    object.__setattr__(g, "is_input", np.array([False, False, True, False, False]))
    with pytest.raises(ValueError, match=r"op 2 .*program input"):
        rx.evaluate(g, keys, 1)
    # A control dependency is a dependency too.
    h = make_graph(compute_cost=[1, 1], temporary_memory=[0, 0], tensor_producer=[0, 0],
                   tensor_size=[1, 0], tensor_is_control=[False, True], edge_tensor=[1],
                   edge_consumer=[1])
    with pytest.raises(ValueError, match=r"op 1 .*program input.*reads tensor 1"):
        rx.evaluate(h, [.5] * 6, 1, inputs=[1])
    with pytest.raises(ValueError, match="does not exist"):
        rx.evaluate(h, [.5] * 6, 1, inputs=[7])
    with pytest.raises(ValueError, match="mask has shape"):
        rx.evaluate(h, [.5] * 6, 1, inputs=np.array([True]))


def test_list_inputs_equal_decode_with_inputs_given_top_priorities():
    # Under the list scheduler, "inputs first, in index order" is exactly §2 with every input's
    # priority raised above all keys, decreasing in op index (keys outside [0,1] are allowed).
    rng = np.random.default_rng(5)
    for i, g in enumerate(random_graphs(12, 6)):
        d = 1 + i % 3
        sources = [j for j in range(g.num_ops) if not np.any(g.edge_consumer == j)]
        chosen = sorted(rng.choice(sources, size=max(1, len(sources) // 2), replace=False))
        keys = rng.random(base_len(g, d))
        boosted = keys.copy()
        for j in chosen:
            boosted[g.num_ops * d + j] = 3.0 - j / g.num_ops
        r = rx.evaluate(g, keys, d, inputs=chosen, latency=.5)
        assert r["order"][:len(chosen)] == [op(j) for j in chosen]
        assert_same_as_decode(r, reference_spec.decode(g, boosted, d, latency=.5))


def test_dynamic_inputs_first_on_their_stream_not_globally():
    # D=2. Ops: 0 x (dev 0, prio .9), 1 w (dev 1, input, prio 0), 2 z (dev 1, prio .95); all
    # sources with 1-B graph outputs, cost 1. At time 0 both compute streams start at 0: device
    # 0 first (ties: smaller device) → x 0–1; device 1: w is an input → w 0–1 despite z's .95;
    # then z 1–2. The list scheduler puts w first globally: w, z, x.
    g = make_graph(compute_cost=[1, 1, 1], temporary_memory=[0, 0, 0],
                   tensor_producer=[0, 1, 2], tensor_size=[1, 1, 1], edge_tensor=[],
                   edge_consumer=[])
    keys = [1, 0, 0, 1, 0, 1] + [.9, 0, .95] + [.5] * 6
    for sched in ("priority", "fifo"):
        r = rx.evaluate(g, keys, 2, scheduler=sched, inputs=[1])
        assert r["placement"] == [0, 1, 1]
        assert r["order"] == [op(0), op(1), op(2)], sched
        assert r["times_exact"] == {op(0): (0, 1), op(1): (0, 1), op(2): (1, 2)}
        no_inputs = rx.evaluate(g, keys, 2, scheduler=sched)
        assert no_inputs["order"] == [op(0), op(2), op(1)]
    lst = rx.evaluate(g, keys, 2, inputs=[1])
    assert lst["order"] == [op(1), op(2), op(0)]
    assert lst["runtime_exact"] == 2


def test_dynamic_single_device_inputs_in_index_order():
    g = inputs_graph()
    keys = [.5] * 5 + INPUTS_PRIO + [.5] * 5
    for sched in ("priority", "fifo"):
        r = rx.evaluate(g, keys, 1, scheduler=sched, inputs=[3, 1])
        assert r["order"][:2] == [op(1), op(3)], sched
        assert r["order"][2:] == [op(4), op(0), op(2)], sched  # all ready at 0: by priority


def test_inputs_never_fuse():
    # w1 (op 1) has key .9 and exactly one consumer y on the same device, but is an input.
    g = inputs_graph()
    keys = [.5] * 5 + INPUTS_PRIO + [.5] * 5 + [.9, .9, 0, .9, 0]
    r = rx.evaluate(g, keys, 1, fusion=True)
    assert groups_of(r) == [[0, 1, 2, 3], [4]]
    r = rx.evaluate(g, keys, 1, fusion=True, inputs=[1, 3])
    assert groups_of(r) == [[0, 2], [1], [3], [4]]
    assert r["order"][:2] == [op(1), op(3)]


# ---------------------------------------------------------------------------------------------
# §8.3 fusion invariants on random graphs
# ---------------------------------------------------------------------------------------------

def op_relations(g):
    n = g.num_ops
    consumers = [set() for _ in range(g.num_tensors)]
    for t, c in zip(g.edge_tensor.tolist(), g.edge_consumer.tolist()):
        consumers[t].add(c)
    outs = [[] for _ in range(n)]
    for t, p in enumerate(g.tensor_producer.tolist()):
        outs[p].append(t)
    readers = [set().union(*(consumers[t] for t in outs[v])) if outs[v] else set()
               for v in range(n)]
    graph_output = [any(not consumers[t] for t in outs[v]) for v in range(n)]
    return consumers, outs, readers, graph_output


def internal_bytes(g, group, consumers):
    return sum(F(float(g.tensor_size[t])) for t in range(g.num_tensors)
               if int(g.tensor_producer[t]) in group and consumers[t] & group)


def check_groups(g, roots, fkeys, placement, cap, inputs):
    consumers, _, readers, graph_output = op_relations(g)
    n = g.num_ops
    groups = {}
    for j, r in enumerate(roots):
        groups.setdefault(r, set()).add(j)
    for r, group in groups.items():
        assert roots[r] == r and r in group
        assert {placement[j] for j in group} == {placement[r]}
        for j in group - {r}:
            # A merged op was a candidate whose one consumer is in its group.
            assert fkeys[j] >= .5 and j not in inputs and not graph_output[j]
            assert len(readers[j]) == 1 and roots[next(iter(readers[j]))] == r
            # In-tree: following the unique consumer reaches the root.
            k, steps = j, 0
            while k != r:
                (k,) = readers[k]
                steps += 1
                assert roots[k] == r and steps <= n
        # The root's outputs are the group's only outputs.
        for t in range(g.num_tensors):
            p = int(g.tensor_producer[t])
            if p in group and (consumers[t] - group or not consumers[t]):
                assert p == r
        if len(group) > 1 and cap is not None:
            assert internal_bytes(g, group, consumers) <= cap
    # Every unmerged candidate was refused for capacity: merging its final group with its
    # consumer's final group (supersets of those at its visit) still exceeds the capacity.
    for v in range(n):
        cand = (fkeys[v] >= .5 and v not in inputs and not graph_output[v]
                and len(readers[v]) == 1 and placement[next(iter(readers[v]))] == placement[v])
        if cand and roots[v] == v:
            assert cap is not None
            (c,) = readers[v]
            assert internal_bytes(g, groups[v] | groups[roots[c]], consumers) > cap
    return groups


def integer_graph(g):
    """Same topology with small integer sizes/costs, so sums and roofline times stay exact in
    float64 (needed to rebuild a contracted Graph for reference_spec)."""
    size = np.where(g.tensor_is_control, 0, np.ceil(g.tensor_size / 4096))
    return make_graph(compute_cost=np.ceil(g.compute_cost * 4),
                      temporary_memory=np.ceil(g.temporary_memory / 4096),
                      tensor_producer=g.tensor_producer, tensor_size=size,
                      tensor_is_control=g.tensor_is_control, edge_tensor=g.edge_tensor,
                      edge_consumer=g.edge_consumer)


def contracted(g, roots, durations, placement, keys, d):
    """Independently rebuilt contracted graph (§8.3) as a Graph for reference_spec, with
    compute_cost = the §8.1 kernel time, plus its keys and pins."""
    consumers, _, _, _ = op_relations(g)
    n, t_count = g.num_ops, g.num_tensors
    kernels = sorted(set(roots))
    kidx = {k: i for i, k in enumerate(kernels)}
    kept = [t for t in range(t_count)
            if not any(roots[c] == roots[int(g.tensor_producer[t])] for c in consumers[t])]
    tidx = {t: i for i, t in enumerate(kept)}
    pairs = sorted({(tidx[t], kidx[roots[c]]) for t in kept for c in consumers[t]})
    temp = [sum(float(g.temporary_memory[j]) for j in range(n) if roots[j] == k)
            for k in kernels]
    gc = make_graph(compute_cost=[float(durations[op(k)]) for k in kernels],
                    temporary_memory=temp,
                    tensor_producer=[kidx[int(g.tensor_producer[t])] for t in kept],
                    tensor_size=[float(g.tensor_size[t]) for t in kept],
                    tensor_is_control=[bool(g.tensor_is_control[t]) for t in kept],
                    edge_tensor=[p[0] for p in pairs], edge_consumer=[p[1] for p in pairs])
    nk = len(kernels)
    prio = [keys[n * d + k] for k in kernels]
    xfer = [keys[n * d + n + t * d + e] for t in kept for e in range(d)]
    keys_c = np.asarray([.5] * (nk * d) + prio + xfer)
    pinned = {i: placement[k] for i, k in enumerate(kernels)}

    def back(item):
        return op(kernels[item[1]]) if item[0] == "op" else xf(kept[item[1]], item[2])
    return gc, keys_c, pinned, back


def test_fusion_invariants_and_contraction_on_random_graphs():
    rng = np.random.default_rng(11)
    merged_any = refused_any = 0
    for i, g0 in enumerate(random_graphs(24, 12)):
        g = integer_graph(g0)
        d = 1 + i % 3
        n = g.num_ops
        keys = rng.random(base_len(g, d))
        if d > 1:  # bias placement towards device 0 so that fusion happens across devices too
            keys[:n * d:d] += .3
        fkeys = rng.random(n) * 1.2
        total = float(np.sum(g.tensor_size))
        cap = [math.inf, 0.0, total * .1, total * .3][i % 4]
        inputs = [j for j in range(n) if not np.any(g.edge_consumer == j)][:1] if i % 2 else []
        kw = {"hbm_bandwidth": [math.inf, 8.0, 0.5][i % 3], "launch_overhead": [0, .25][i % 2],
                  "latency": [0, 1.5][i % 2], "bandwidth": [math.inf, 4.0][i % 2]}
        r = rx.evaluate(g, np.concatenate([keys, fkeys]), d, fusion=True, fusion_capacity=cap,
                        inputs=inputs, **kw)
        groups = check_groups(g, r["fusion"], fkeys, r["placement"],
                              None if math.isinf(cap) else F(cap), set(inputs))
        merged_any += sum(len(m) > 1 for m in groups.values())
        refused_any += sum(1 for v in range(n) if r["fusion"][v] == v and fkeys[v] >= .5)
        assert sorted(k for _, k in [it for it in r["order"] if it[0] == "op"]) == sorted(groups)
        # Kernel times: max(Σ cost, bytes / hbm) + overhead, bytes from the rebuilt graph.
        gc, keys_c, pinned, back = contracted(g, r["fusion"], r["durations_exact"],
                                              r["placement"], keys, d)
        kernels = sorted(groups)
        for i_k, k in enumerate(kernels):
            reads = {int(t) for t, c in zip(gc.edge_tensor, gc.edge_consumer) if c == i_k}
            writes = {t for t in range(gc.num_tensors) if gc.tensor_producer[t] == i_k}
            b = sum(F(float(gc.tensor_size[t])) for t in reads | writes)
            c = sum(F(float(g.compute_cost[j])) for j in groups[k])
            hbm = kw["hbm_bandwidth"]
            want = max(c, F(0) if math.isinf(hbm) else b / F(hbm)) + F(kw["launch_overhead"])
            assert r["durations_exact"][op(k)] == want
        if inputs:
            continue  # reference_spec knows nothing of program inputs
        # The list scheduler on the contraction = reference_spec.decode on the rebuilt graph.
        ref = reference_spec.decode(gc, keys_c, d, pinned=pinned, latency=kw["latency"],
                                    bandwidth=kw["bandwidth"])
        assert r["order"] == [back(it) for it in ref["order"]]
        assert r["device_peaks_exact"] == ref["device_peaks_exact"]
        assert r["runtime_exact"] == ref["runtime_exact"]
        assert r["times_exact"] == {back(k): v for k, v in ref["times_exact"].items()}
        # The dynamic schedulers' §3 walk on the contraction = reference_spec's walk of the
        # same order (which also checks that it holds exactly the required transfers).
        for sched in ("priority", "fifo"):
            rd = rx.evaluate(g, np.concatenate([keys, fkeys]), d, fusion=True,
                             fusion_capacity=cap, scheduler=sched, **kw)
            assert rd["fusion"] == r["fusion"]
            fwd = {back(it): it for it in ref["order"]}
            walk = reference_spec.evaluate_order(gc, ref["placement"],
                                                 [fwd[it] for it in rd["order"]], d)
            assert rd["device_peaks_exact"] == walk["device_peaks_exact"]
    assert merged_any > 10 and refused_any > 5  # the random cases exercise both branches


def test_fusion_keys_below_half_equal_unfused_with_roofline():
    rng = np.random.default_rng(21)
    for i, g in enumerate(random_graphs(9, 22)):
        d = 1 + i % 3
        keys = rng.random(base_len(g, d))
        kw = {"hbm_bandwidth": float(np.mean(g.tensor_size)) * (i + 1) / 4,
                  "launch_overhead": .125 * i, "latency": .5, "bandwidth": 1e5}
        for sched in rx.SCHEDULERS:
            plain = rx.evaluate(g, keys, d, scheduler=sched, **kw)
            fused = rx.evaluate(g, np.concatenate([keys, rng.random(g.num_ops) * .4999]), d,
                                fusion=True, fusion_capacity=0, scheduler=sched, **kw)
            for field in ("placement", "order", "device_peaks_exact", "runtime_exact",
                          "times_exact", "durations_exact"):
                assert fused[field] == plain[field], (sched, field)
            assert fused["fusion"] == list(range(g.num_ops))


def test_fusion_capacity_zero_only_merges_zero_byte_links():
    # A chain a → b → c whose a→b link is a 0-B control edge and b→c a 4-B tensor: with
    # capacity 0, a fuses into b (internal 0 B) and b does not fuse into c.
    g = make_graph(compute_cost=[1, 1, 1], temporary_memory=[0, 0, 0], tensor_producer=[0, 1, 2],
                   tensor_size=[0, 4, 1], tensor_is_control=[True, False, False],
                   edge_tensor=[0, 1], edge_consumer=[1, 2])
    keys = [.5] * 3 + [.3, .2, .1] + [.5] * 3
    r = rx.evaluate(g, keys + [.9, .8, .9], 1, fusion=True, fusion_capacity=0)
    assert r["fusion"] == [1, 1, 2]
    r = rx.evaluate(g, keys + [.9, .8, .9], 1, fusion=True, fusion_capacity=4)
    assert r["fusion"] == [2, 2, 2]


def test_fusion_key_ties_visit_smaller_index_first():
    # Ops 0 (3-B output) and 1 (2-B output) both feed op 2; equal fusion keys .7, capacity 3.
    # Op 0 is visited first: {0, 2} has 3 B inside (≤ 3); then op 1 would make it 5 B > 3.
    # (Visiting op 1 first would give {1, 2}, and op 0 would then be refused.)
    g = make_graph(compute_cost=[1, 1, 1], temporary_memory=[0, 0, 0], tensor_producer=[0, 1, 2],
                   tensor_size=[3, 2, 1], edge_tensor=[0, 1], edge_consumer=[2, 2])
    keys = [.5] * 3 + [.3, .2, .1] + [.5] * 3
    assert rx.evaluate(g, keys + [.7, .7, 0], 1, fusion=True, fusion_capacity=3)["fusion"] == [
        2, 1, 2]
    # A larger key goes first whatever its index.
    assert rx.evaluate(g, keys + [.7, .8, 0], 1, fusion=True, fusion_capacity=3)["fusion"] == [
        0, 2, 2]


def test_multi_output_op_with_one_consumer_fuses_and_graph_output_blocks():
    # Op 0 writes t0 and t1, both read by op 1; op 1 writes t2 (read by 2) and t3 (graph
    # output). Op 0 fuses into 1 (one consumer op); op 1 never fuses (it has a graph output).
    g = make_graph(compute_cost=[1, 2, 3], temporary_memory=[0, 1, 0],
                   tensor_producer=[0, 0, 1, 1, 2], tensor_size=[1, 2, 3, 4, 5],
                   edge_tensor=[0, 1, 2], edge_consumer=[1, 1, 2])
    keys = [.5] * 3 + [.9, .8, .7] + [.5] * 5 + [.9, .9, .9]
    r = rx.evaluate(g, keys, 1, fusion=True, hbm_bandwidth=1)
    assert r["fusion"] == [1, 1, 2]
    # Kernel 1: reads nothing from outside, writes t2, t3 (7 B) → max(3, 7) = 7; temp 1.
    # Kernel 2: reads t2, writes t4 → max(3, 8) = 8. Memory: K1 3+4+1 = 8 (t3 freed);
    # K2 3+5 = 8.
    assert r["durations_exact"] == {op(1): 7, op(2): 8}
    assert r["device_peaks_exact"] == [8] and r["runtime_exact"] == 15


def test_fusion_needs_same_device_and_transfer_keys_are_the_roots():
    # D=2 diamond, §5 placement [0,0,1,0]: b (dev 0) may fuse into d (dev 0); c (dev 1) may not.
    # The kernel d = {b, d} reads t0 and t2 (transferred), writes t3. Transfers X(t0,1) and
    # X(t2,0) keep their original tensor indices and keys; t1 is internal.
    g = diamond_graph()
    r = rx.evaluate(g, D2_KEYS + [0, .9, .9, 0], 2, fusion=True)
    assert r["fusion"] == [A, D_, C, D_]
    # List order: a (.9); ready: c? no (needs X(t0,1)); X(t0,1) (.5, key of t0 on dev 1 = .6?)
    # keys: t0 → [.5, .6], t2 → [.2, .3]. So X(t0,1) prio .6, then c (.7), X(t2,0) (.2), d.
    assert r["order"] == [op(A), xf(0, 1), op(C), xf(2, 0), op(D_)]
    # Device 0: a 4 | X(t0,1) counts on dev 1: 4 | (t0 still read by kernel d on dev 0)
    # c on dev 1: 4+3+5 = 12, t0 copy freed | X(t2,0): dev 0 4+3 = 7 | d: 7+1 = 8 → [8, 12].
    assert r["device_peaks_exact"] == [8, 12]
    # Times (§4): a 0–2, X 2–2, c 2–6, X 6–6, kernel d (3+1 = 4) 6–10.
    assert r["runtime_exact"] == 10


# ---------------------------------------------------------------------------------------------
# §8.2 fifo vs priority, dynamic vs list
# ---------------------------------------------------------------------------------------------

def spq_graph(d2):
    # s (cost 1, prio .9), p (source, prio .1), q reads s (prio .5); with d2 also r on device 1
    # reading q (cost 10). t0 s→q (1 B), t1 p out (10 B), t2 q out (1 B), [t3 r out (1 B)].
    if d2:
        return make_graph(compute_cost=[1, 1, 1, 10], temporary_memory=[0] * 4,
                          tensor_producer=[0, 1, 2, 3], tensor_size=[1, 10, 1, 1],
                          edge_tensor=[0, 2], edge_consumer=[2, 3])
    return make_graph(compute_cost=[1, 1, 1], temporary_memory=[0] * 3,
                      tensor_producer=[0, 1, 2], tensor_size=[1, 10, 1], edge_tensor=[0],
                      edge_consumer=[2])


def test_fifo_vs_priority_single_device():
    # At 1 (after s): p ready since 0, q ready since 1. priority: q (.5 > .1); fifo: p.
    # priority memory: s 1 | q 1+1 = 2 (t0, t2 freed) | p 10 → 10.
    # fifo memory: s 1 | p 1+10 = 11 | q 2 → 11. Both: no idle, runtime 3.
    g = spq_graph(False)
    keys = [.5] * 3 + [.9, .1, .5] + [.5] * 3
    pr = rx.evaluate(g, keys, 1, scheduler="priority")
    ff = rx.evaluate(g, keys, 1, scheduler="fifo")
    assert pr["order"] == [op(0), op(2), op(1)] and pr["device_peaks_exact"] == [10]
    assert ff["order"] == [op(0), op(1), op(2)] and ff["device_peaks_exact"] == [11]
    assert ff["ready_exact"] == {op(0): 0, op(1): 0, op(2): 1}
    assert pr["runtime_exact"] == ff["runtime_exact"] == 3


def test_fifo_vs_priority_two_devices():
    # s, p, q on device 0; r on device 1 (reads q through X(t2,1), 0 s).
    # priority: s 0–1, q 1–2; at 2 comp0 (p) and copy1 (X) tie → compute first: p 2–3,
    #   X 2–2, r 2–12 → 12.
    # fifo: s 0–1 (ready tie with p, .9 > .1), p 1–2 (ready 0 < 1), q 2–3, X 3–3, r 3–13 → 13.
    # list (§2/§4): s, q, X (.5 > p's .1), r (.5), p: s 0–1, q 1–2, X 2–2, r 2–12, p 2–3.
    g = spq_graph(True)
    keys = [1, 0, 1, 0, 1, 0, 0, 1] + [.9, .1, .5, .5] + [.5] * 8
    pr = rx.evaluate(g, keys, 2, scheduler="priority")
    assert pr["order"] == [op(0), op(2), op(1), xf(2, 1), op(3)]
    assert pr["times_exact"] == {op(0): (0, 1), op(2): (1, 2), op(1): (2, 3), xf(2, 1): (2, 2),
                                 op(3): (2, 12)}
    ff = rx.evaluate(g, keys, 2, scheduler="fifo")
    assert ff["order"] == [op(0), op(1), op(2), xf(2, 1), op(3)]
    assert ff["times_exact"] == {op(0): (0, 1), op(1): (1, 2), op(2): (2, 3), xf(2, 1): (3, 3),
                                 op(3): (3, 13)}
    lst = rx.evaluate(g, keys, 2)
    assert lst["order"] == [op(0), op(2), xf(2, 1), op(3), op(1)]
    assert (pr["runtime_exact"], ff["runtime_exact"], lst["runtime_exact"]) == (12, 13, 12)


def test_asynchronous_copy_overlaps_compute():
    # Row 5's keys with bandwidth 1: X(t0,1) (4 B) 2–6 runs on device 1's copy-in stream while
    # b runs 2–5 on device 0's compute; c 6–10; X(t2,0) (3 B) 10–13; d 13–14. Under the list
    # scheduler the copy blocks both devices: a 0–2, b 2–5, X(t0,1) 5–9, c 9–13,
    # X(t2,0) 13–16, d 16–17.
    g = diamond_graph()
    pr = rx.evaluate(g, D2_KEYS, 2, scheduler="priority", bandwidth=1)
    assert pr["times_exact"] == {op(A): (0, 2), op(B): (2, 5), xf(0, 1): (2, 6),
                                 op(C): (6, 10), xf(2, 0): (10, 13), op(D_): (13, 14)}
    assert rx.evaluate(g, D2_KEYS, 2, bandwidth=1)["runtime_exact"] == 17


def assert_no_idle(times):
    spans = sorted(times.values())
    assert spans[0][0] == 0
    for (_, e0), (s1, _) in itertools.pairwise(spans):
        assert s1 == e0


def test_single_device_dynamic_vs_list():
    # Provable on one device (no transfers): every known item is ready by the stream's free
    # time, so "priority" picks exactly what §2 picks (same order, times, peaks) and both
    # dynamic schedulers run back to back, so their runtime is the sum of kernel times, which
    # is also the list scheduler's runtime. With fusion, roofline and inputs too.
    rng = np.random.default_rng(31)
    for i, g in enumerate(random_graphs(12, 32)):
        keys = rng.random(base_len(g, 1))
        if i % 3 == 0:
            keys = np.round(keys * 3) / 3  # ties
        fk = rng.random(g.num_ops)
        sources = [j for j in range(g.num_ops) if not np.any(g.edge_consumer == j)]
        kw = {"hbm_bandwidth": float(np.mean(g.tensor_size)) * (1 + i % 3), "launch_overhead": .5,
                  "fusion": bool(i % 2), "inputs": sources[1:3]}
        k = np.concatenate([keys, fk]) if kw["fusion"] else keys
        lst = rx.evaluate(g, k, 1, **kw)
        pr = rx.evaluate(g, k, 1, scheduler="priority", **kw)
        ff = rx.evaluate(g, k, 1, scheduler="fifo", **kw)
        for field in ("order", "times_exact", "device_peaks_exact", "runtime_exact"):
            assert pr[field] == lst[field], field
        assert_no_idle(lst["times_exact"])
        assert_no_idle(ff["times_exact"])
        assert ff["runtime_exact"] == lst["runtime_exact"] == sum(lst["durations_exact"].values())


def disjoint_union(g1, g2):
    n1, t1 = g1.num_ops, g1.num_tensors
    cat = np.concatenate
    return make_graph(compute_cost=cat([g1.compute_cost, g2.compute_cost]),
                      temporary_memory=cat([g1.temporary_memory, g2.temporary_memory]),
                      tensor_producer=cat([g1.tensor_producer, g2.tensor_producer + n1]),
                      tensor_size=cat([g1.tensor_size, g2.tensor_size]),
                      tensor_is_control=cat([g1.tensor_is_control, g2.tensor_is_control]),
                      edge_tensor=cat([g1.edge_tensor, g2.edge_tensor + t1]),
                      edge_consumer=cat([g1.edge_consumer, g2.edge_consumer + n1]))


def test_no_transfers_priority_equals_list_per_device():
    # Two components pinned to devices 0 and 1: no tensor crosses devices, so the list
    # schedule restricted to a device is that device's priority-greedy order, and every device
    # runs back to back in both models: identical times per item (the global orders interleave
    # differently, so only times and peaks are compared).
    rng = np.random.default_rng(41)
    graphs = random_graphs(8, 42)
    for g1, g2 in zip(graphs[::2], graphs[1::2]):
        g = disjoint_union(g1, g2)
        pinned = {j: int(j >= g1.num_ops) for j in range(g.num_ops)}
        keys = rng.random(base_len(g, 2))
        lst = rx.evaluate(g, keys, 2, pinned=pinned, hbm_bandwidth=1e4)
        pr = rx.evaluate(g, keys, 2, pinned=pinned, hbm_bandwidth=1e4, scheduler="priority")
        assert not any(it[0] == "xfer" for it in lst["order"])
        assert pr["times_exact"] == lst["times_exact"]
        assert pr["device_peaks_exact"] == lst["device_peaks_exact"]
        assert pr["runtime_exact"] == lst["runtime_exact"]


def check_dynamic(g, r, keys, d, sched, inputs):
    """Properties the §8.2 words imply, checked from the result alone."""
    n = g.num_ops
    times, order, ready = r["times_exact"], r["order"], r["ready_exact"]
    placement = r["placement"]
    deps = reference_spec.dependencies(g, placement, d)
    assert set(order) == set(deps) and len(order) == len(deps)
    pos = {it: i for i, it in enumerate(order)}
    starts = [times[it][0] for it in order]
    assert starts == sorted(starts)  # the start order is chronological

    def stream(it):
        return (0, placement[it[1]]) if it[0] == "op" else (1, it[2])

    def prio(it):
        return keys[n * d + it[1]] if it[0] == "op" else keys[n * d + n + it[1] * d + it[2]]

    def rank(it):
        first = (0, it[1]) if it[0] == "op" and it[1] in inputs else (1, 0)
        tie = (0, it[1], 0) if it[0] == "op" else (1, it[1], it[2])
        mid = (-prio(it),) if sched == "priority" else (ready[it], -prio(it))
        return first + mid + tie

    for it in order:
        # Ready time = latest end of its dependencies (0 without any); it starts no earlier.
        assert ready[it] == max([times[dp][1] for dp in deps[it]], default=0)
        assert times[it][0] >= ready[it]
        assert all(pos[dp] < pos[it] for dp in deps[it])
    by_stream = {}
    for it in order:
        by_stream.setdefault(stream(it), []).append(it)
    for items in by_stream.values():
        gaps = [(F(0), times[items[0]][0])]
        for a, b in itertools.pairwise(items):
            assert times[b][0] >= times[a][1]  # one item at a time per stream
            gaps.append((times[a][1], times[b][0]))
        for i, it in enumerate(items):
            # Non-delay: the stream is never idle while the item is ready and waiting.
            for g0, g1 in gaps:
                assert not (g0 < g1 and ready[it] < g1 and g0 < times[it][0]), (it, g0, g1)
            # The chosen item ranks first among later items of its stream that were known
            # (all dependencies started before it) and ready by its start.
            for other in items[i + 1:]:
                if (all(pos[dp] < pos[it] for dp in deps[other])
                        and ready[other] <= times[it][0]):
                    assert rank(it) < rank(other), (sched, it, other)


def test_dynamic_schedule_properties_on_random_graphs():
    rng = np.random.default_rng(51)
    for i, g in enumerate(random_graphs(14, 52)):
        d = 2 + i % 2
        keys = rng.random(base_len(g, d))
        if i % 4 == 1:
            keys = np.round(keys * 2) / 2  # many ties
        sources = [j for j in range(g.num_ops) if not np.any(g.edge_consumer == j)]
        inputs = set(sources[:2]) if i % 2 else set()
        size = float(np.mean(g.tensor_size))
        kw = {"latency": float(rng.random()) * 2, "bandwidth": size * (1 + i % 3),
                  "hbm_bandwidth": [math.inf, size * 4][i % 2], "launch_overhead": .1 * (i % 3)}
        for sched in ("priority", "fifo"):
            r = rx.evaluate(g, keys, d, scheduler=sched, inputs=sorted(inputs), **kw)
            check_dynamic(g, r, keys.tolist(), d, sched, inputs)
            # §3 is the walk of the start order: same peaks as reference_spec's walk of it
            # (which also checks that the order holds exactly the required transfers).
            walk = reference_spec.evaluate_order(g, r["placement"], r["order"], d)
            assert r["device_peaks_exact"] == walk["device_peaks_exact"]
            assert r["step_usage"] == walk["step_usage"]
            # Transfers: latency + size / bandwidth; kernels: the roofline.
            for it, dur in r["durations_exact"].items():
                if it[0] == "xfer":
                    assert dur == F(kw["latency"]) + F(float(g.tensor_size[it[1]])) / F(
                        kw["bandwidth"])
            assert r["runtime_exact"] == max(e for _, e in r["times_exact"].values())


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------

def test_bad_input_is_rejected_with_clear_errors():
    g = diamond_graph()
    with pytest.raises(ValueError,
                       match=r"12 keys, expected N\*D \+ N \+ T\*D \+ N = 16.*needs N fusion"):
        rx.evaluate(g, D1_KEYS, 1, fusion=True)
    with pytest.raises(ValueError, match=r"13 keys, expected N\*D \+ N \+ T\*D = 12 "):
        rx.evaluate(g, D1_KEYS + [.5], 1)
    with pytest.raises(ValueError, match="only allowed with fusion=True"):
        rx.evaluate(g, D1_KEYS + D1_FUSION, 1)
    with pytest.raises(ValueError, match="unknown scheduler 'lifo'"):
        rx.evaluate(g, D1_KEYS, 1, scheduler="lifo")
    with pytest.raises(ValueError, match="key 4 is NaN"):
        rx.evaluate(g, [.5] * 4 + [math.nan] + [.5] * 7, 1)
    with pytest.raises(ValueError, match="key 14 is NaN"):
        rx.evaluate(g, D1_KEYS + [0, 0, math.nan, 0], 1, fusion=True)
    for kw, msg in [({"latency": -1}, "latency must be >= 0"),
                    ({"latency": math.inf}, "latency must be finite"),
                    ({"bandwidth": 0}, "bandwidth must be > 0"),
                    ({"hbm_bandwidth": -2}, "hbm_bandwidth must be > 0"),
                    ({"hbm_bandwidth": math.nan}, "hbm_bandwidth must be > 0"),
                    ({"launch_overhead": -.5}, "launch_overhead must be >= 0"),
                    ({"capacity": -1}, "capacity must be >= 0"),
                    ({"capacity": math.nan}, "capacity must be >= 0"),
                    ({"fusion_capacity": -1}, "fusion_capacity must be >= 0"),
                    ({"fusion": "yes"}, "fusion must be a bool")]:
        with pytest.raises((ValueError, TypeError), match=msg):
            rx.evaluate(g, D1_KEYS, 1, **kw)
    with pytest.raises(ValueError, match="num_devices must be >= 1"):
        rx.evaluate(g, D1_KEYS, 0)
    with pytest.raises(ValueError, match="1-D"):
        rx.evaluate(g, np.zeros((3, 4)), 1)
