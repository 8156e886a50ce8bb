"""SPEC §8.2's schedulers on a CPU in blocks of chromosomes (gsched.costmodel.dense_dynamic,
decoder "dense" with scheduler "priority" / "fifo", what "auto" runs on a CPU): bit for bit the
loop of gsched.costmodel.dynamic and its memory walk (order, start and end times, peaks,
runtime) on random graphs with program inputs and exact key ties, D = 1–3, several chunks, a
fan whose streams hold hundreds of known items with equal ready times (also with windows of
the block's successor entries that span chromosomes), populations that do not fill a block,
pinned ops and fusion, a graph padded into a larger bucket; both it and the loop against the
independent reference (tests/reference_exec.py); the slot groups' sizes. Each grid runs some
of its values by default, the rest under ``make test-slow`` (tests/grids.py)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from gsched.core.padding import Bucket, pad_graph, pad_keys
from gsched.costmodel import dense_dynamic
from gsched.costmodel.evaluate import evaluate_population, evaluate_with_decoder
from gsched.costmodel.host import evaluation_to_dict
from gsched.costmodel.params import CostParams
from gsched.generators import random_computation_graph
from tests.graphs import with_inputs
from tests.grids import diagonal_then_slow, slow_except
from tests.test_pallas_decode import (
    BUCKET,
    PARAMS,
    compare,
    compare_on_small_graphs,
    small_graphs,
    tie_keys,
)
from tests.test_pallas_lanes_dynamic import (
    assert_matches_the_reference,
    compare_on_a_fan,
    fan,
)

SCHEDULERS = ("priority", "fifo")


def dense(padded, keys, d, params=PARAMS, **kwargs):
    return compare(padded, keys, d, params, decoder="dense", **kwargs)


@pytest.mark.parametrize("d, scheduler", diagonal_then_slow([1, 2, 3], SCHEDULERS))
def test_matches_the_loop_bit_for_bit(d, scheduler):
    feasible = compare_on_small_graphs(d, decoder="dense", scheduler=scheduler)
    assert feasible.any() and not feasible.all()  # the capacity bites for some


@pytest.mark.parametrize("chunk, scheduler",
                         slow_except([(1, "fifo"), (3, "priority"), (16, "fifo")], (3, "priority")))
def test_any_chunk_of_successor_entries_matches(chunk, scheduler):
    rng = np.random.default_rng(40 + chunk)
    graph = small_graphs(rng)[1]
    dense(pad_graph(graph, BUCKET), tie_keys(rng, graph, 4, 2), 2, chunk=chunk,
          scheduler=scheduler)


@pytest.mark.parametrize("scheduler", slow_except(SCHEDULERS, "priority"))
def test_many_known_items_with_equal_ready_times(scheduler):
    compare_on_a_fan("dense", scheduler)


def test_windows_of_entries_that_span_chromosomes(monkeypatch):
    # Each of 8 chromosomes starts the fan's root (300 firing successors) at some step; with a
    # window of 8 // 2 = 4 entries of the block's list, windows start inside one chromosome's
    # range and end in the next one's. The population is this test's own: a fresh trace.
    monkeypatch.setattr(dense_dynamic, "ENTRY_SHARE", 2)
    graph = fan(300)
    bucket = Bucket(302, 301, 600)
    rng = np.random.default_rng(5)
    dense(pad_graph(graph, bucket), tie_keys(rng, graph, 8, 2, bucket=bucket), 2,
          CostParams(latency=0.5, bandwidth=8.0), scheduler="priority")


@pytest.mark.parametrize("width", [1 << e for e in range(15)])
def test_slot_groups_split_the_width_about_evenly(width):
    group = dense_dynamic.group_size(width)
    assert group & (group - 1) == 0 and width % group == 0  # powers of two: whole groups
    assert group * group >= width and (group // 2) ** 2 < width  # ⌈√width⌉ in powers of two


@pytest.mark.parametrize("population", slow_except([1, 5, dense_dynamic.BLOCK + 3], 1,
                                                   dense_dynamic.BLOCK + 3))
def test_populations_that_do_not_fill_a_block(population):
    rng = np.random.default_rng(population)
    graph = with_inputs(random_computation_graph(25, rng), rng)
    dense(pad_graph(graph, BUCKET), tie_keys(rng, graph, population, 2), 2, scheduler="fifo")


@pytest.mark.parametrize("scheduler", slow_except(SCHEDULERS, "fifo"))
def test_pinned_ops_and_fusion(scheduler):
    rng = np.random.default_rng(4)
    graph = with_inputs(random_computation_graph(20, rng), rng)
    pinned = np.full(BUCKET.num_ops, -1, np.int32)
    pinned[[0, 3, 7]] = [1, 0, 1]
    got = dense(pad_graph(graph, BUCKET), tie_keys(rng, graph, 5, 2, fusion=True), 2,
                pinned=pinned, fusion=True, scheduler=scheduler)
    assert (np.asarray(got.placement)[:, [0, 3, 7]] == [1, 0, 1]).all()
    assert (np.asarray(got.fusion) != np.arange(BUCKET.num_ops)).any()  # some ops fused


def test_padding_into_a_larger_bucket_changes_nothing():
    rng = np.random.default_rng(6)
    graph = with_inputs(random_computation_graph(24, rng), rng)
    keys = rng.random((3, graph.chromosome_length(2))).astype(np.float32)

    def runs(bucket):  # each chromosome's items, order, times, peaks and runtime
        got = evaluate_with_decoder(pad_graph(graph, bucket), pad_keys(keys, graph, bucket, 2),
                                    PARAMS, num_devices=2, decoder="dense",
                                    scheduler="priority")
        return [evaluation_to_dict(jax.tree.map(lambda x: x[i], got), graph, bucket, 2)
                for i in range(3)]

    assert runs(Bucket(24, 48, 48)) == runs(Bucket(64, 128, 128))


def test_auto_runs_it_on_a_cpu(monkeypatch):
    calls = []
    schedule = dense_dynamic._schedule
    monkeypatch.setattr(dense_dynamic, "_schedule", lambda *a, **k: calls.append(1) or
                        schedule(*a, **k))
    rng = np.random.default_rng(9)
    bucket = Bucket(40, 80, 96)  # used by no other test: a fresh trace
    graph = random_computation_graph(30, rng)
    keys = pad_keys(rng.random((2, graph.chromosome_length(2))), graph, bucket, 2)
    evaluate_population(pad_graph(graph, bucket), keys, PARAMS, num_devices=2,
                        scheduler="fifo")
    assert calls if jax.default_backend() == "cpu" else not calls


# "auto" runs "dense" against the reference in tests/test_exec_model.py too.
@pytest.mark.parametrize("scheduler, decoder", diagonal_then_slow(SCHEDULERS, ["loop", "dense"]))
def test_matches_the_independent_reference(scheduler, decoder):
    # "auto" runs "dense" on a CPU (tests/test_exec_model.py); the loop keeps its own check.
    assert_matches_the_reference(scheduler, decoder)
