"""Tests of the slow reference cost model (tests/reference_spec.py) against SPEC §5 and
hand-derived cases. Every expected number below is worked out on paper in the comments."""

from __future__ import annotations

import math
import random
from fractions import Fraction as F

import numpy as np
import pytest

from gsched.core.graph import make_graph
from tests.reference_spec import (
    decode,
    dependencies,
    evaluate_order,
    placement_from_keys,
    required_transfers,
)

A, B, C, D_ = 0, 1, 2, 3  # diamond op indices


def op(j):
    return ("op", j)


def xf(t, d):
    return ("xfer", t, d)


def chrom(aff, prio, xfer):
    return np.asarray(list(aff) + list(prio) + list(xfer), np.float64)


def diamond():
    # SPEC §5: t0 = a→{b,c} (4 B), t1 = b→d (2 B), t2 = c→d (3 B), t3 = output of d (1 B).
    return make_graph(
        compute_cost=[2, 3, 4, 1],
        temporary_memory=[0, 0, 5, 0],
        tensor_producer=[A, B, C, D_],
        tensor_size=[4, 2, 3, 1],
        edge_tensor=[0, 0, 1, 2],
        edge_consumer=[B, C, D_, D_],
        op_names=["a", "b", "c", "d"],
    )


# ---------------------------------------------------------------------------------------------
# SPEC §5 worked example, all three rows
# ---------------------------------------------------------------------------------------------

def test_spec_row1_single_device_abcd():
    # a: 0+4=4 | b: 4+2=6 | c: 6+3+5=14, then t0 freed (live 5) | d: 5+1=6, t3 freed.
    r = decode(diamond(), chrom([.5] * 4, [.9, .8, .7, .1], [.5] * 4), 1)
    assert r["placement"] == [0, 0, 0, 0]
    assert r["order"] == [op(A), op(B), op(C), op(D_)]
    assert r["device_peaks_exact"] == [14]
    assert r["device_peaks"] == [14.0]
    assert r["peak_memory"] == 14.0
    assert r["runtime_exact"] == 10 and r["runtime"] == 10.0
    assert r["feasible"] is True
    # one device: items run back to back.
    assert r["times_exact"] == {op(A): (0, 2), op(B): (2, 5), op(C): (5, 9), op(D_): (9, 10)}
    assert [u for (_, _, u) in r["step_usage"]] == [4, 6, 14, 6]


def test_spec_row2_single_device_acbd():
    # a: 4 | c: 4+3+5=12 (live 7) | b: 7+2=9, t0 freed (live 5) | d: 5+1=6.
    r = decode(diamond(), chrom([.5] * 4, [.9, .7, .8, .1], [.5] * 4), 1)
    assert r["placement"] == [0, 0, 0, 0]
    assert r["order"] == [op(A), op(C), op(B), op(D_)]
    assert r["device_peaks_exact"] == [12]
    assert r["runtime_exact"] == 10


def test_spec_row3_two_devices():
    g = diamond()
    keys = chrom([.9, .1, .9, .1, .1, .9, .9, .1], [.9, .8, .7, .1],
                 [.5, .6, .5, .5, .2, .3, .5, .5])
    r = decode(g, keys, 2)
    # placement [0,0,1,0] → transfers X(t0,1) (prio .6) and X(t2,0) (prio .2).
    assert r["placement"] == [0, 0, 1, 0]
    assert r["order"] == [op(A), op(B), xf(0, 1), op(C), xf(2, 0), op(D_)]
    # dev0: a 4 | b 4+2=6 | X(t0,1) frees t0 on 0 (live 2) | X(t2,0): 2+3=5 | d: 5+1=6
    # dev1: X(t0,1): 0+4=4 | c: 4+3+5=12 (then t0 freed, live 3) | X(t2,0) frees t2 on 1
    assert r["device_peaks_exact"] == [6, 12]
    assert r["device_peaks"] == [6.0, 12.0]
    assert r["peak_memory"] == 12.0
    # a 0-2, b 2-5, X(t0,1) starts max(2, free0=5, free1=0)=5 (0 long), c 5-9,
    # X(t2,0) starts max(9, free1=9, free0=5)=9, d starts max(9, t1@5, t2@9)=9 → 10.
    assert r["times_exact"] == {op(A): (0, 2), op(B): (2, 5), xf(0, 1): (5, 5), op(C): (5, 9),
                                xf(2, 0): (9, 9), op(D_): (9, 10)}
    assert r["runtime"] == 10.0
    assert [(it, dev, u) for (it, dev, u) in r["step_usage"]] == [
        (op(A), 0, 4), (op(B), 0, 6), (xf(0, 1), 1, 4), (op(C), 1, 12), (xf(2, 0), 0, 5),
        (op(D_), 0, 6)]


def test_decode_equals_evaluate_order_of_its_own_output():
    g = diamond()
    keys = chrom([.9, .1, .9, .1, .1, .9, .9, .1], [.9, .8, .7, .1],
                 [.5, .6, .5, .5, .2, .3, .5, .5])
    r = decode(g, keys, 2, latency=1.5, bandwidth=2.0, capacity=11)
    e = evaluate_order(g, r["placement"], r["order"], 2, latency=1.5, bandwidth=2.0, capacity=11)
    assert e == r


# ---------------------------------------------------------------------------------------------
# Multi-output op (D = 1)
# ---------------------------------------------------------------------------------------------

def multi_output_graph():
    # ops p=0 (cost 1, temp 1), q=1 (cost 2), r=2 (cost 3)
    # t0 = p→q (3 B), t1 = p→r (5 B), t2 = output of q (2 B), t3 = output of r (1 B),
    # t4 = control p→r (0 B).
    return make_graph(compute_cost=[1, 2, 3], temporary_memory=[1, 0, 0],
                      tensor_producer=[0, 0, 1, 2, 0], tensor_size=[3, 5, 2, 1, 0],
                      tensor_is_control=[False, False, False, False, True],
                      edge_tensor=[0, 1, 4], edge_consumer=[1, 2, 2])


def test_multi_output_op_prq():
    # prio p .9, q .5, r .6 → p, then r (.6) before q (.5).
    # p: 0 + (3+5+0) + temp 1 = 9 → resident t0,t1,t4 (live 8)
    # r: 8 + 1 = 9 → t3 freed (no reader), t1 and t4 freed (last reader r) → live 3
    # q: 3 + 2 = 5 → t2, t0 freed. Peak 9. Times p 0-1, r 1-4, q 4-6.
    g = multi_output_graph()
    r = decode(g, chrom([.5] * 3, [.9, .5, .6], [.5] * 5), 1)
    assert r["order"] == [op(0), op(2), op(1)]
    assert [u for (_, _, u) in r["step_usage"]] == [9, 9, 5]
    assert r["device_peaks_exact"] == [9]
    assert r["times_exact"] == {op(0): (0, 1), op(2): (1, 4), op(1): (4, 6)}
    assert r["runtime_exact"] == 6


def test_multi_output_op_pqr():
    # p: 9 (live 8) | q: 8+2 = 10 → t2, t0 freed (live 5) | r: 5+1 = 6. Peak 10.
    g = multi_output_graph()
    r = decode(g, chrom([.5] * 3, [.9, .6, .5], [.5] * 5), 1)
    assert r["order"] == [op(0), op(1), op(2)]
    assert [u for (_, _, u) in r["step_usage"]] == [9, 10, 6]
    assert r["device_peaks_exact"] == [10]


# ---------------------------------------------------------------------------------------------
# One tensor, two consumers on another device: ONE transfer
# ---------------------------------------------------------------------------------------------

def two_remote_consumers():
    # a=0 (dev0, cost 1), b=1 (dev1, cost 2), c=2 (dev1, cost 3)
    # t0 = a→{b,c} (4 B), t1 = output of b (1 B), t2 = output of c (2 B).
    g = make_graph(compute_cost=[1, 2, 3], temporary_memory=[0, 0, 0],
                   tensor_producer=[0, 1, 2], tensor_size=[4, 1, 2],
                   edge_tensor=[0, 0], edge_consumer=[1, 2])
    # aff a→0, b→1, c→1; prio a .1, b .3, c .4; X(t0,1) key .2 (the others are unused).
    keys = chrom([.9, .1, .1, .9, .2, .8], [.1, .3, .4], [.7, .2, .9, .9, .9, .9])
    return g, keys


def test_two_consumers_on_remote_device_share_one_transfer():
    g, keys = two_remote_consumers()
    assert required_transfers(g, [0, 1, 1], 2) == [(0, 1)]
    r = decode(g, keys, 2)
    # a; then only X(t0,1) is ready; then c (.4) before b (.3).
    assert r["order"] == [op(0), xf(0, 1), op(2), op(1)]
    # dev0: a 4 → t0 read only by X(t0,1), freed after it.
    # dev1: X: 0+4=4 | c: 4+2=6 (t2 freed) | b: 4+1=5 (t0, t1 freed).
    assert r["device_peaks_exact"] == [4, 6]
    # a 0-1, X start max(1,1,0)=1 (0 long), c 1-4, b 4-6.
    assert r["times_exact"] == {op(0): (0, 1), xf(0, 1): (1, 1), op(2): (1, 4), op(1): (4, 6)}
    assert r["runtime_exact"] == 6


def test_two_consumers_latency_bandwidth():
    g, keys = two_remote_consumers()
    # X lasts 1 + 4/2 = 3: X 1-4, c 4-7, b 7-9. Memory unchanged.
    r = decode(g, keys, 2, latency=1, bandwidth=2)
    assert r["times_exact"][xf(0, 1)] == (1, 4)
    assert r["times_exact"][op(2)] == (4, 7)
    assert r["times_exact"][op(1)] == (7, 9)
    assert r["runtime_exact"] == 9
    assert r["device_peaks_exact"] == [4, 6]


# ---------------------------------------------------------------------------------------------
# Control dependency across devices (size-0 transfer), tensor with no consumers
# ---------------------------------------------------------------------------------------------

def control_graph():
    # a=0 (dev0, cost 2), b=1 (dev1, cost 1, temp 2)
    # t0 = output of a, 7 B, no consumers; t1 = control a→b (0 B).
    g = make_graph(compute_cost=[2, 1], temporary_memory=[0, 2], tensor_producer=[0, 0],
                   tensor_size=[7, 0], tensor_is_control=[False, True],
                   edge_tensor=[1], edge_consumer=[1])
    keys = chrom([.9, .1, .1, .9], [.5, .5], [.5] * 4)
    return g, keys


def test_control_dependency_across_devices():
    g, keys = control_graph()
    assert required_transfers(g, [0, 1], 2) == [(1, 1)]
    assert dependencies(g, [0, 1], 2)[op(1)] == {xf(1, 1)}
    r = decode(g, keys, 2)
    assert r["order"] == [op(0), xf(1, 1), op(1)]
    # dev0: a: 0 + 7 + 0 = 7; t0 (no reader) freed right after; t1 freed after X(t1,1).
    # dev1: X(t1,1): 0 + 0 = 0 | b: 0 + 0 (no outputs) + temp 2 = 2.
    assert r["step_usage"] == [(op(0), 0, 7), (xf(1, 1), 1, 0), (op(1), 1, 2)]
    assert r["device_peaks_exact"] == [7, 2]
    # a 0-2, X 2-2, b 2-3.
    assert r["times_exact"] == {op(0): (0, 2), xf(1, 1): (2, 2), op(1): (2, 3)}
    assert r["runtime_exact"] == 3


def test_control_transfer_pays_latency_only():
    g, keys = control_graph()
    # X lasts 3 + 0/1 = 3: X 2-5, b 5-6.
    r = decode(g, keys, 2, latency=3, bandwidth=1)
    assert r["times_exact"][xf(1, 1)] == (2, 5)
    assert r["runtime_exact"] == 6


def test_output_tensor_counts_only_at_its_step():
    # a single op with a 7 B output and no consumers, then an independent op.
    g = make_graph(compute_cost=[1, 1], temporary_memory=[0, 3], tensor_producer=[0],
                   tensor_size=[7], edge_tensor=[], edge_consumer=[])
    r = decode(g, chrom([.5, .5], [.9, .1], [.5]), 1)
    # op0: 0 + 7 = 7, freed | op1: 0 + 0 + 3 = 3.
    assert r["step_usage"] == [(op(0), 0, 7), (op(1), 0, 3)]
    assert r["device_peaks_exact"] == [7]
    assert r["runtime_exact"] == 2


# ---------------------------------------------------------------------------------------------
# Tensor whose only readers on its producer's device are transfers
# ---------------------------------------------------------------------------------------------

def test_tensor_read_only_by_transfers_is_freed_after_the_last_one():
    # D = 3. a=0 (dev0, cost 1), b=1 (dev1, cost 2), c=2 (dev2, cost 3), e=3 (dev0, cost 4).
    # t0 = a→{b,c} (10 B), t1 = output of e (1 B).
    g = make_graph(compute_cost=[1, 2, 3, 4], temporary_memory=[0, 0, 0, 0],
                   tensor_producer=[0, 3], tensor_size=[10, 1],
                   edge_tensor=[0, 0], edge_consumer=[1, 2])
    aff = [.9, .1, .1, .1, .9, .1, .1, .1, .9, .9, .1, .1]
    prio = [.9, .1, .1, .5]  # a, b, c, e
    xfer = [0, .8, .3, 0, 0, 0]  # X(t0,1) .8, X(t0,2) .3
    r = decode(g, chrom(aff, prio, xfer), 3)
    assert r["placement"] == [0, 1, 2, 0]
    # a (.9 > e .5); ready e .5, X1 .8, X2 .3 → X1; then e (.5); then X2 (.3) vs b (.1) → X2;
    # then b, c tie at .1 → b (smaller index), c.
    assert r["order"] == [op(0), xf(0, 1), op(3), xf(0, 2), op(1), op(2)]
    # dev0: a: 10 | e: 10 (t0 still waiting for X2) + 1 = 11 | X2 frees t0 on dev0.
    # dev1: X1: 0 + 10 = 10 | b: 10. dev2: X2: 10 | c: 10.
    assert r["step_usage"] == [(op(0), 0, 10), (xf(0, 1), 1, 10), (op(3), 0, 11),
                               (xf(0, 2), 2, 10), (op(1), 1, 10), (op(2), 2, 10)]
    assert r["device_peaks_exact"] == [11, 10, 10]
    # a 0-1; X1 max(1, 1, 0) = 1 → 1; e 1-5; X2 max(1, free0=5, free2=0) = 5 → 5;
    # b on dev1 max(free1=1, 1) = 1 → 3; c max(5, 5) = 5 → 8.
    assert r["times_exact"] == {op(0): (0, 1), xf(0, 1): (1, 1), op(3): (1, 5),
                                xf(0, 2): (5, 5), op(1): (1, 3), op(2): (5, 8)}
    assert r["runtime_exact"] == 8


# ---------------------------------------------------------------------------------------------
# Pinned ops
# ---------------------------------------------------------------------------------------------

ROW3 = chrom([.9, .1, .9, .1, .1, .9, .9, .1], [.9, .8, .7, .1], [.5, .6, .5, .5, .2, .3, .5, .5])


def test_pin_everything_to_one_device():
    # pinning c to 0 puts all ops on 0 → no transfers, order a b c d, peaks [14, 0].
    r = decode(diamond(), ROW3, 2, pinned={C: 0})
    assert r["placement"] == [0, 0, 0, 0]
    assert r["order"] == [op(A), op(B), op(C), op(D_)]
    assert r["device_peaks_exact"] == [14, 0]
    assert r["runtime_exact"] == 10


def test_pin_producer_to_other_device():
    # pin a to 1 → placement [1,0,1,0]. Transfers: X(t0,0) (key t0·2+0 → .5), X(t2,0) (.2).
    # Schedule: a; ready c .7 (same device as a), X(t0,0) .5 → c; ready X(t0,0) .5, X(t2,0) .2
    # → X(t0,0); ready b .8, X(t2,0) .2 → b; X(t2,0); d.
    r = decode(diamond(), ROW3, 2, pinned={A: 1})
    assert r["placement"] == [1, 0, 1, 0]
    assert r["order"] == [op(A), op(C), xf(0, 0), op(B), xf(2, 0), op(D_)]
    # dev1: a 4 | c: 4+3+5 = 12 (t0 kept for X(t0,0)) | X(t0,0) frees t0 on 1 | X(t2,0) frees t2
    # dev0: X(t0,0): 4 | b: 4+2 = 6 (t0 freed, live 2) | X(t2,0): 2+3 = 5 | d: 5+1 = 6
    assert r["device_peaks_exact"] == [6, 12]
    # a 0-2 (dev1), c 2-6, X(t0,0) max(2, free1=6, free0=0) = 6 → 6, b 6-9,
    # X(t2,0) max(6, free1=6, free0=9) = 9 → 9, d 9-10.
    assert r["times_exact"] == {op(A): (0, 2), op(C): (2, 6), xf(0, 0): (6, 6), op(B): (6, 9),
                                xf(2, 0): (9, 9), op(D_): (9, 10)}
    assert r["runtime_exact"] == 10


def test_pinned_validation():
    with pytest.raises(ValueError, match="device"):
        decode(diamond(), ROW3, 2, pinned={A: 2})
    with pytest.raises(ValueError, match="op 9"):
        decode(diamond(), ROW3, 2, pinned={9: 0})


# ---------------------------------------------------------------------------------------------
# Priority ties
# ---------------------------------------------------------------------------------------------

def tie_graph():
    # a=0 (dev0) produces t0 (1 B) and t1 (2 B), both read by b=1 (dev1); c=2 (dev0), no inputs.
    g = make_graph(compute_cost=[1, 1, 1], temporary_memory=[0, 0, 0],
                   tensor_producer=[0, 0], tensor_size=[1, 2],
                   edge_tensor=[0, 1], edge_consumer=[1, 1])
    aff = [.9, .1, .1, .9, .9, .1]
    return g, aff


def test_ties_ops_before_transfers_then_index():
    g, aff = tie_graph()
    r = decode(g, chrom(aff, [.5, .5, .5], [.5] * 4), 2)
    # a and c tie → a (index 0). Then c, X(t0,1), X(t1,1) all .5 → op c first, then the
    # transfers by tensor index, then b.
    assert r["order"] == [op(0), op(2), xf(0, 1), xf(1, 1), op(1)]
    # dev0: a: 1+2 = 3 | c: 3. dev1: X(t0,1): 1 | X(t1,1): 1+2 = 3 | b: 3.
    assert r["device_peaks_exact"] == [3, 3]


def test_ties_ops_by_index_after_higher_transfers():
    g, aff = tie_graph()
    r = decode(g, chrom(aff, [.5, .5, .5], [.5, .6, .5, .6]), 2)
    # after a: X(t0,1) .6, X(t1,1) .6 beat c .5; then b and c tie at .5 → b (index 1) first.
    assert r["order"] == [op(0), xf(0, 1), xf(1, 1), op(1), op(2)]


def test_ties_transfers_by_tensor_then_device():
    # D = 3. a=0 (dev0) → t0 read by b=1 (dev2), t1 read by c=2 (dev1) and b (dev2).
    g = make_graph(compute_cost=[1, 1, 1], temporary_memory=[0, 0, 0],
                   tensor_producer=[0, 0], tensor_size=[1, 1],
                   edge_tensor=[0, 1, 1], edge_consumer=[1, 2, 1])
    aff = [.9, .1, .1, .1, .1, .9, .1, .9, .1]
    r = decode(g, chrom(aff, [.5, .1, .1], [.3] * 6), 3)
    assert r["placement"] == [0, 2, 1]
    # transfers X(t0,2), X(t1,1), X(t1,2) all .3: (0,2) < (1,1) < (1,2).
    assert r["order"] == [op(0), xf(0, 2), xf(1, 1), xf(1, 2), op(1), op(2)]


def test_affinity_ties_go_to_first_device():
    assert placement_from_keys(diamond(), [.5] * 8 + [0] * 4 + [0] * 8, 2) == [0, 0, 0, 0]
    # D = 3: a [.2,.7,.7] → 1, b [.7,.1,.7] → 0, c [.1,.7,.7] → 1, d [.5,.5,.5] → 0.
    keys = [.2, .7, .7, .7, .1, .7, .1, .7, .7, .5, .5, .5] + [0] * 4 + [0] * 12
    assert placement_from_keys(diamond(), keys, 3) == [1, 0, 1, 0]


# ---------------------------------------------------------------------------------------------
# Latency / bandwidth: a transfer keeps both devices busy
# ---------------------------------------------------------------------------------------------

def latency_graph():
    # a=0 (dev0, cost 2), b=1 (dev1, cost 1), e=2 (dev0, cost 1, no inputs), f=3 (dev1, cost 10)
    # t0 = a→b (6 B).
    g = make_graph(compute_cost=[2, 1, 1, 10], temporary_memory=[0, 0, 0, 0],
                   tensor_producer=[0], tensor_size=[6], edge_tensor=[0], edge_consumer=[1])
    aff = [.9, .1, .1, .9, .9, .1, .1, .9]
    return g, aff


@pytest.mark.parametrize("latency,bandwidth,x_end", [
    (0, math.inf, 2),     # X 2-2, e 2-3, b 2-3, f 3-13
    (1, 3, 5),            # X lasts 1 + 6/3 = 3: X 2-5, e 5-6 (dev0 busy), b 5-6, f 6-16
    (0, 4, F(7, 2)),      # X lasts 6/4 = 1.5: X 2-3.5, e and b 3.5-4.5, f 4.5-14.5
])
def test_transfer_blocks_source_device(latency, bandwidth, x_end):
    g, aff = latency_graph()
    # prio a .9, b .1, e .5, f .0; X(t0,1) .8. f (.0) is ready from the start but lowest:
    # a, X(.8), e(.5), b(.1), f(.0). a 0-2; X starts max(2, free0=2, free1=0) = 2.
    r = decode(g, chrom(aff, [.9, .1, .5, .0], [.0, .8]), 2, latency=latency,
               bandwidth=bandwidth)
    assert r["order"] == [op(0), xf(0, 1), op(2), op(1), op(3)]
    t = r["times_exact"]
    assert t[xf(0, 1)] == (2, x_end)
    assert t[op(2)] == (x_end, x_end + 1)
    assert t[op(1)] == (x_end, x_end + 1)
    # f runs after b on dev1: ends x_end + 1 + 10.
    assert t[op(3)] == (x_end + 1, x_end + 11)
    assert r["runtime_exact"] == x_end + 11


def test_transfer_waits_for_busy_destination():
    g, aff = latency_graph()
    # f (.95) runs first on dev1: 0-10. a 0-2 on dev0. X(t0,1) starts max(2, free0=2,
    # free1=10) = 10, lasts 1 + 6/2 = 4 → 14; e (dev0) waits for X: 14-15; b 14-15.
    r = decode(g, chrom(aff, [.9, .1, .5, .95], [.0, .8]), 2, latency=1, bandwidth=2)
    assert r["order"] == [op(3), op(0), xf(0, 1), op(2), op(1)]
    t = r["times_exact"]
    assert t[op(3)] == (0, 10) and t[op(0)] == (0, 2)
    assert t[xf(0, 1)] == (10, 14)
    assert t[op(2)] == (14, 15) and t[op(1)] == (14, 15)
    assert r["runtime_exact"] == 15


# ---------------------------------------------------------------------------------------------
# Capacity
# ---------------------------------------------------------------------------------------------

def test_capacity_feasibility():
    g = diamond()  # row 3 peaks [6, 12]
    assert decode(g, ROW3, 2)["feasible"] is True
    assert decode(g, ROW3, 2, capacity=12)["feasible"] is True
    r = decode(g, ROW3, 2, capacity=11.5)
    assert r["feasible"] is False
    assert r["device_excess_exact"] == [0, F(1, 2)]
    assert decode(g, ROW3, 2, capacity=6)["feasible"] is False
    assert decode(g, ROW3, 2, capacity=math.inf)["feasible"] is True


# ---------------------------------------------------------------------------------------------
# Exactness, D = 1 specifics, input validation
# ---------------------------------------------------------------------------------------------

def test_sizes_are_exact():
    # sizes 0.1 and 0.2 (float64) and a huge size beyond float32's exact integers.
    g = make_graph(compute_cost=[0.1, 0.2], temporary_memory=[3e10 + 1, 0],
                   tensor_producer=[0, 0], tensor_size=[0.1, 0.2],
                   edge_tensor=[0], edge_consumer=[1])
    r = decode(g, chrom([.5, .5], [.9, .1], [.5, .5]), 1)
    assert r["device_peaks_exact"] == [F(0.1) + F(0.2) + F(3e10 + 1)]
    assert r["runtime_exact"] == F(0.1) + F(0.2)


def test_single_device_ignores_affinity_and_transfer_keys():
    g = diamond()
    base = decode(g, chrom([.5] * 4, [.9, .8, .7, .1], [.5] * 4), 1)
    other = decode(g, chrom([.0, 1., .3, .2], [.9, .8, .7, .1], [1., 0., .2, .9]), 1)
    assert base == other
    assert all(it[0] == "op" for it in base["order"])


def test_key_length_checked():
    with pytest.raises(ValueError, match="expected"):
        decode(diamond(), [.5] * 11, 1)
    with pytest.raises(ValueError, match="expected"):
        decode(diamond(), [.5] * 13, 1)
    with pytest.raises(ValueError, match="expected N\\*D \\+ N \\+ T\\*D = 20"):
        decode(diamond(), [.5] * 12, 2)
    with pytest.raises(ValueError, match="NaN"):
        decode(diamond(), [math.nan] + [.5] * 11, 1)


def test_empty_graph():
    g = make_graph(compute_cost=[], temporary_memory=[], tensor_producer=[], tensor_size=[],
                   edge_tensor=[], edge_consumer=[])
    r = decode(g, [], 2)
    assert r["order"] == [] and r["runtime_exact"] == 0 and r["device_peaks_exact"] == [0, 0]


# ---------------------------------------------------------------------------------------------
# evaluate_order validation
# ---------------------------------------------------------------------------------------------

def test_evaluate_order_accepts_lists_and_other_valid_orders():
    g = diamond()
    # JSON-style lists; a different valid order: a X(t0,1) c b X(t2,0) d
    r = evaluate_order(g, [0, 0, 1, 0], [["op", 0], ["xfer", 0, 1], ["op", 2], ["op", 1],
                                         ["xfer", 2, 0], ["op", 3]], 2)
    # dev0: a 4 | (X(t0,1) does not free t0: b still reads it) | b: 4+2 = 6, t0 freed (live 2)
    #       | X(t2,0): 2+3 = 5 | d: 5+1 = 6.   dev1: X(t0,1): 4 | c: 4+3+5 = 12.
    assert r["device_peaks_exact"] == [6, 12]
    # a 0-2, X 2-2, c 2-6 (dev1), b 2-5 (dev0), X(t2,0) max(6, 6, 5) = 6, d 6-7.
    assert r["runtime_exact"] == 7


@pytest.mark.parametrize("order,message", [
    ([op(0), op(1), xf(0, 1), op(2), xf(2, 0)], "missing item \\('op', 3\\)"),
    ([op(0), op(1), xf(0, 1), xf(1, 1), op(2), xf(2, 0), op(3)], "not a required transfer"),
    ([op(0), op(1), op(2), xf(0, 1), xf(2, 0), op(3)], "before its dependency \\('xfer', 0, 1\\)"),
    ([op(0), op(1), xf(0, 1), op(2), xf(2, 0), op(3), op(3)], "twice"),
    ([op(0), op(1), xf(0, 1), op(2), xf(2, 0), ("op", 7)], "missing op 7"),
    ([op(0), op(1), xf(0, 1), op(2), xf(2, 0), ("xfer", 2, 5), op(3)], "missing device 5"),
    ([op(0), op(1), xf(0, 1), op(2), xf(2, 0), ("oops", 3)], "neither"),
    ([op(1), op(0), xf(0, 1), op(2), xf(2, 0), op(3)], "before its dependency \\('op', 0\\)"),
])
def test_evaluate_order_rejects(order, message):
    with pytest.raises(ValueError, match=message):
        evaluate_order(diamond(), [0, 0, 1, 0], order, 2)


def test_evaluate_order_rejects_bad_placement():
    with pytest.raises(ValueError, match="device 2"):
        evaluate_order(diamond(), [0, 0, 2, 0], [], 2)
    with pytest.raises(ValueError, match="entries"):
        evaluate_order(diamond(), [0, 0, 0], [], 2)


# ---------------------------------------------------------------------------------------------
# Random graphs: decoded orders are valid and obey the greedy rule step by step
# ---------------------------------------------------------------------------------------------

def random_graph(rng: random.Random, n: int):
    producer, sizes, control, et, ec = [], [], [], [], []
    for j in range(n):
        for _ in range(rng.randint(0, 2)):
            producer.append(j)
            sizes.append(float(rng.randint(0, 9)))
            control.append(False)
    for j in range(n):  # occasional control tensor j → later op
        if j + 1 < n and rng.random() < 0.3:
            producer.append(j)
            sizes.append(0.0)
            control.append(True)
    for t, p in enumerate(producer):
        for c in range(p + 1, n):
            if rng.random() < 0.35 or (control[t] and c == p + 1):
                et.append(t)
                ec.append(c)
    return make_graph(compute_cost=[rng.randint(0, 5) for _ in range(n)],
                      temporary_memory=[rng.randint(0, 3) for _ in range(n)],
                      tensor_producer=producer, tensor_size=sizes, tensor_is_control=control,
                      edge_tensor=et, edge_consumer=ec)


@pytest.mark.parametrize("seed", range(20))
def test_random_decode_is_greedy_and_consistent(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 9)
    g = random_graph(rng, n)
    d = rng.randint(1, 3)
    # keys on a coarse grid so ties happen
    keys = [rng.randint(0, 3) / 3 for _ in range(g.chromosome_length(d))]
    r = decode(g, keys, d, latency=rng.choice([0, 1]), bandwidth=rng.choice([math.inf, 2.0]))
    deps = dependencies(g, r["placement"], d)
    assert set(r["order"]) == set(deps)

    def rank(item):  # larger = earlier
        if item[0] == "op":
            return (keys[n * d + item[1]], 1, -item[1], 0)
        return (keys[n * d + n + item[1] * d + item[2]], 0, -item[1], -item[2])

    done = set()
    for item in r["order"]:
        ready = [x for x in deps if x not in done and deps[x] <= done]
        assert item == max(ready, key=rank)
        done.add(item)
    # runtime = latest end; every op waits for its dependencies.
    times = r["times_exact"]
    for item, ds in deps.items():
        for dep in ds:
            assert times[item][0] >= times[dep][1]
    assert r["runtime_exact"] == max((e for _, e in times.values()), default=0)
    assert r["peak_memory_exact"] == max(r["device_peaks_exact"])
