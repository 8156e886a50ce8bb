"""The ``topoformer`` optimize method: a trained Topoformer's orders, scored by the cost model.

Single device only (D = 1, the Neural Topological Ordering setting). The runner is a traceable
``fn(key, graphs [B], cost_params, *, num_devices, budget, objective)``: features, encoder,
decoding and the cost-model evaluation of the decoded orders (via ``order_keys``) run as one
jitted computation. ``decode`` (the option; ``--decode`` on the command line): ``greedy``
(1 order), ``sample`` (best of ``K``) or ``beam`` (width ``K``, state collapsing; the
default, the paper's best), ``K = min(16, budget)``; ``evals_used`` = the ``K`` complete
orders scored (beam search tracks the exact peak of its ``K`` beams to the end;
beams that collapsed into another are scored as copies of the best).

Checkpoints are model exports (:func:`save_model`, metadata ``kind = "topoformer_model"``,
written by ``python -m train.topoformer`` to ``<run_dir>/model``); a run directory stands for
its ``model`` export. The default is the small model shipped in
``gsched/topoformer/checkpoints/topoformer_small``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from gsched.cost_model import CostParams, order_keys
from gsched.padding import PaddedGraph
from gsched.search import SearchResult, no_best, scored_batch, track_best
from gsched.topoformer.decode import MODES, best_index
from gsched.topoformer.decode import decode as decode_graph
from gsched.topoformer.model import Topoformer, TopoformerConfig, graph_inputs

CHECKPOINTS = Path(__file__).parent / "checkpoints"
DEFAULT_CHECKPOINT = CHECKPOINTS / "topoformer_small"
MODEL_KIND = "topoformer_model"  # metadata "kind" of a model export
MODEL_DIR = "model"  # a run directory's model export
WIDTH = 16  # samples / beam width (NTO §5)
TRAIN_HINT = ("train one with `python -m train.topoformer --config "
              "train/configs/topoformer_small.toml --run-dir DIR` and pass "
              "--checkpoint DIR")


def save_model(path: str | Path, model: Topoformer, config: TopoformerConfig,
               extra: dict[str, Any] | None = None) -> None:
    """Exports ``model`` (and its config) as a checkpoint at ``path`` (must not exist)."""
    from gsched.training import config_to_dict, save_checkpoint

    save_checkpoint(path, model, {"kind": MODEL_KIND, "model": config_to_dict(config),
                                  **(extra or {})})


def load_model(path: str | Path) -> tuple[Topoformer, TopoformerConfig]:
    """``(model, config)`` from a model export or a run directory holding one; a missing or
    foreign checkpoint raises ``ValueError`` naming the path and how to train one."""
    from gsched.training import config_from_dict, load_checkpoint, read_checkpoint_metadata

    path = Path(path)
    if (path / MODEL_DIR).is_dir():
        path = path / MODEL_DIR
    if not path.exists():
        raise ValueError(f"Topoformer checkpoint {path} does not exist; {TRAIN_HINT}")
    meta = read_checkpoint_metadata(path)
    if meta.get("kind") != MODEL_KIND:
        raise ValueError(f"{path} is not a Topoformer model export (kind "
                         f"{meta.get('kind')!r}); {TRAIN_HINT}")
    config = config_from_dict(TopoformerConfig, meta["model"], source=str(path))
    model, _ = load_checkpoint(path, Topoformer(config, jax.random.key(0)))
    return model, config


def decoded_orders(model: Topoformer, config: TopoformerConfig, decoding: str,
                   key: jax.Array, graphs: PaddedGraph, width: int) -> tuple[jnp.ndarray,
                                                                             jnp.ndarray]:
    """The model's decoded orders of ``graphs [B]`` (traceable): ``(orders [B, K, N], best
    [B])``, ``K = width`` (1 for greedy); beams that collapsed into another are replaced by
    the best order, ``best`` indexes the order of lowest peak memory."""
    batch = graphs.op_mask.shape[0]
    priorities = jax.vmap(model)(jax.vmap(lambda g: graph_inputs(g, config))(graphs))
    decoded = jax.vmap(lambda g, p, k: decode_graph(g, p, k, mode=decoding, width=width))(
        graphs, priorities, jax.random.split(key, batch))
    best = best_index(decoded)  # [B]
    orders = jnp.where(decoded.valid[..., None], decoded.order,
                       decoded.order[jnp.arange(batch), best][:, None])
    return orders, best


def decode_width(decoding: str, budget: int) -> int:
    """Orders decoded (and evaluations counted): 1 for greedy, else ``min(16, budget)``."""
    return 1 if decoding == "greedy" else min(WIDTH, budget)


def check_single_device(name: str, num_devices: int) -> None:
    """A ``ValueError`` naming ``name`` unless ``num_devices == 1``."""
    if num_devices != 1:
        raise ValueError(f"{name} orders ops on a single device; got num_devices="
                         f"{num_devices}")


def search(model: Topoformer, config: TopoformerConfig, decoding: str, key: jax.Array,
           graphs: PaddedGraph, cost_params: CostParams, *, num_devices: int, budget: int,
           objective: str) -> SearchResult:
    """Decodes ``graphs [B]`` and scores the orders with the cost model (traceable)."""
    check_single_device("topoformer", num_devices)
    width = decode_width(decoding, budget)
    batch = graphs.op_mask.shape[0]
    orders, _ = decoded_orders(model, config, decoding, key, graphs, width)
    keys = jax.vmap(jax.vmap(lambda g, o: order_keys(g, o, jnp.zeros_like(o), 1),
                             in_axes=(None, 0)))(graphs, orders)

    def evaluate(k):
        return scored_batch(graphs, k, cost_params, num_devices=1, objective=objective)

    evaluation, values = evaluate(keys)
    result = track_best(no_best(evaluate, batch, keys.shape[-1]), values, keys, evaluation)
    return SearchResult(result.value, result.keys, result.evaluation,
                        jnp.full(batch, width, jnp.int32))


def load(checkpoint: str | Path | None = None, decode: str = "beam") -> tuple[Topoformer,
                                                                             TopoformerConfig]:
    """``(model, config)`` of ``checkpoint`` (default: the shipped one) after checking the
    decoding mode; errors name the problem and how to train a model."""
    if decode not in MODES:
        raise ValueError(f"unknown decode mode {decode!r} for topoformer; expected one of "
                         f"{MODES}")
    if checkpoint is None and not DEFAULT_CHECKPOINT.exists():
        raise ValueError(f"the default Topoformer checkpoint {DEFAULT_CHECKPOINT} is missing; "
                         f"{TRAIN_HINT}")
    return load_model(DEFAULT_CHECKPOINT if checkpoint is None else checkpoint)


def build(checkpoint: str | Path | None = None, decode: str = "beam"):
    """The ``topoformer`` runner for :mod:`gsched.methods` (loads the checkpoint now);
    ``decode``: the decoding mode (``--decode``)."""
    model, config = load(checkpoint, decode)

    def runner(key, graphs, cost_params, *, num_devices, budget, objective):
        return search(model, config, decode, key, graphs, cost_params,
                      num_devices=num_devices, budget=budget, objective=objective)

    return runner
