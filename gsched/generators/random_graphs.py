"""REGAL-style random computation graphs (the structure of REGAL §4.1 / A.1 TensorFlow graphs).

Neither REGAL paper specifies its synthetic generator, so this one reproduces the features the
REGAL cost model and GNN must handle (SPEC §1): ops with several outputs, tensors read by
several ops, an op reading several outputs of one producer (parallel edges in the GNN view),
control dependencies (size-0 tensors with ``tensor_is_control``), heavy-tailed integer tensor
sizes in bytes, temporary memory on some ops and positive compute costs.

Construction (all vectorized): ops are laid out in a random topological order ``0..N-1``; every
input of the op at position ``i`` reads a tensor of an op at a position ``< i``, mostly a recent
one (distance ~ Geometric with mean ``locality``) and sometimes any earlier one
(``long_range_prob``, giving residual-like long edges and tensors with many readers). Op indices
are then shuffled, so the identity order is (almost surely) not topological. Tensors are
numbered as in SPEC §1.1: data tensors by (producer, port), then control tensors by consumer.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from gsched.core.graph import Graph, make_graph
from gsched.generators.layered import as_rng


@dataclasses.dataclass(frozen=True)
class RandomGraphParams:
    """Distribution of :func:`random_computation_graph`.

    Attributes:
      source_fraction: probability that an op (other than the first) has no data inputs, like
        TensorFlow's constants, variables and placeholders.
      mean_extra_inputs: data inputs of a non-source op are ``1 + Poisson(mean_extra_inputs)``
        (repeated reads of one tensor collapse into one consumer relation).
      locality: mean topological distance from an op to the producer of a local input.
      long_range_prob: probability that an input (data or control) reads from an op drawn
        uniformly among all earlier ops instead.
      multi_output_prob: probability that an op has ``U{2..max_outputs}`` outputs instead of 1.
      max_outputs: largest number of outputs of an op.
      read_all_outputs_prob: probability that an input from a multi-output op reads every output
        of it (e.g. a concat of a split), which makes parallel GNN edges.
      control_rate: control inputs of an op (other than the first) are ``Poisson(control_rate)``.
      size_log_mean, size_log_std: tensor sizes are ``round(LogNormal(mean, std))`` bytes, at
        least 1 (median ``e^mean`` = 16 KiB by default; ``std`` 1 puts the largest of a few hundred
        tensors ~20× above the median: with ``std`` 2 one tensor set the peak of most graphs
        and every schedule reached the single-op lower bound, leaving nothing to optimize).
      temp_memory_prob: probability that an op has temporary memory, drawn like tensor sizes.
      cost_log_mean, cost_log_std: compute costs are ``LogNormal(mean, std)`` time units.
    """

    source_fraction: float = 0.1
    mean_extra_inputs: float = 0.8
    locality: float = 8.0
    long_range_prob: float = 0.15
    multi_output_prob: float = 0.2
    max_outputs: int = 4
    read_all_outputs_prob: float = 0.3
    control_rate: float = 0.15
    size_log_mean: float = math.log(16384.0)
    size_log_std: float = 1.0
    temp_memory_prob: float = 0.2
    cost_log_mean: float = 0.0
    cost_log_std: float = 1.0


def random_computation_graph(num_ops: int, rng_or_seed=None, *,
                             params: RandomGraphParams = RandomGraphParams(),
                             name: str | None = None) -> Graph:
    """A random DAG computation graph with ``num_ops`` ops (≥ 1); see :class:`RandomGraphParams`.

    ``rng_or_seed`` is a ``np.random.Generator`` or a seed; the graph is a function of it.
    """
    if num_ops < 1:
        raise ValueError(f"num_ops must be at least 1, got {num_ops}")
    rng = as_rng(rng_or_seed)
    n, p = num_ops, params
    pos = np.arange(n)
    num_out = np.where(rng.random(n) < p.multi_output_prob,
                       rng.integers(2, p.max_outputs + 1, n), 1)
    out_offset = np.cumsum(num_out) - num_out
    is_source = (rng.random(n) < p.source_fraction) | (pos == 0)
    num_in = np.where(is_source, 0, 1 + rng.poisson(p.mean_extra_inputs, n))

    # Data inputs: (consumer, producer, port) in topological positions.
    consumer = np.repeat(pos, num_in)
    producer = _earlier_ops(consumer, p, rng)
    port = np.floor(rng.random(consumer.size) * num_out[producer]).astype(np.int64)
    read_all = (num_out[producer] > 1) & (rng.random(consumer.size) < p.read_all_outputs_prob)
    width = num_out[producer[read_all]]
    consumer = np.concatenate([consumer, np.repeat(consumer[read_all], width)])
    producer = np.concatenate([producer, np.repeat(producer[read_all], width)])
    port = np.concatenate([port, np.arange(width.sum()) - np.repeat(np.cumsum(width) - width,
                                                                    width)])
    data_pairs = np.unique((out_offset[producer] + port) * n + consumer)

    ctrl_consumer = np.repeat(pos, np.where(pos == 0, 0, rng.poisson(p.control_rate, n)))
    ctrl_pairs = np.unique(_earlier_ops(ctrl_consumer, p, rng) * n + ctrl_consumer)

    # Shuffle op indices; renumber tensors by (new producer, port), controls by new consumer.
    new_index = rng.permutation(n)
    t_prod_pos = np.repeat(pos, num_out)
    t_port = np.arange(num_out.sum()) - out_offset[t_prod_pos]
    t_order = np.lexsort((t_port, new_index[t_prod_pos]))
    t_rank = np.empty_like(t_order)
    t_rank[t_order] = np.arange(t_order.size)
    c_order = np.argsort(new_index[ctrl_pairs % n], kind="stable")
    ctrl_pairs = ctrl_pairs[c_order]
    num_data, num_ctrl = t_order.size, ctrl_pairs.size

    sizes = _log_normal_bytes(num_data, p, rng)
    temp = np.where(rng.random(n) < p.temp_memory_prob, _log_normal_bytes(n, p, rng), 0.0)
    cost = rng.lognormal(p.cost_log_mean, p.cost_log_std, n)
    at_index = np.argsort(new_index)  # at_index[j] = topological position of op j
    return make_graph(
        compute_cost=cost[at_index],
        temporary_memory=temp[at_index],
        tensor_producer=np.concatenate([new_index[t_prod_pos[t_order]],
                                        new_index[ctrl_pairs // n]]),
        tensor_size=np.concatenate([sizes, np.zeros(num_ctrl)]),
        tensor_is_control=np.arange(num_data + num_ctrl) >= num_data,
        tensor_port=np.concatenate([t_port[t_order], np.full(num_ctrl, -1)]),
        edge_tensor=np.concatenate([t_rank[data_pairs // n], num_data + np.arange(num_ctrl)]),
        edge_consumer=new_index[np.concatenate([data_pairs % n, ctrl_pairs % n])],
        name=name if name is not None else f"random_n{n}",
    )


def _earlier_ops(consumer: np.ndarray, p: RandomGraphParams, rng) -> np.ndarray:
    """``[K]`` a producer position ``< consumer`` for each consumer position (all ≥ 1)."""
    local = consumer - rng.geometric(min(1.0, 1.0 / p.locality), consumer.size)
    uniform = np.floor(rng.random(consumer.size) * consumer).astype(np.int64)
    return np.where(rng.random(consumer.size) < p.long_range_prob, uniform,
                    np.maximum(local, 0))


def _log_normal_bytes(count: int, p: RandomGraphParams, rng) -> np.ndarray:
    return np.maximum(1.0, np.rint(rng.lognormal(p.size_log_mean, p.size_log_std, count)))
