"""The learned methods of the registry (``gsched.methods``): ``regal``, ``gas`` and ``idrs``.

Each ``build_*(checkpoint=..., decode=...)`` loads a trained policy and returns a traceable
runner ``fn(key, graphs [B], cost_params, *, num_devices, budget, objective)`` →
:class:`~gsched.search.SearchResult` (:func:`gsched.regal.rollout.guided_search`):

* ``regal`` — the GNN policy's per-node Betas guiding BRKGA (REGAL);
* ``gas`` — the same heads on an LSTM over the topologically sorted nodes (a policy trained
  with ``policy.encoder = "lstm"``);
* ``idrs`` — the REGAL policy's distributions with plain random sampling instead of BRKGA.

The feature search spends the ``feature_evals`` of the checkpoint's training config (400 in
REGAL A.1) of the budget. A checkpoint is a policy export (``train.regal`` writes
``<run_dir>/policy``) or a training run directory / checkpoint (the policy is taken from its
training state). Loading imports orbax (``gsched.training``), so it happens in ``build``, never
at import.
"""

from __future__ import annotations

import functools
from pathlib import Path

import jax

from gsched.regal.gnn import SequenceEncoder
from gsched.regal.policy import Policy, PolicyConfig
from gsched.regal.rollout import DECODINGS, FEATURE_EVALS, guided_search

CHECKPOINTS = Path(__file__).parent / "checkpoints"
DEFAULT_CHECKPOINTS = {"regal": CHECKPOINTS / "regal", "gas": CHECKPOINTS / "gas",
                       "idrs": CHECKPOINTS / "regal"}
POLICY_KIND = "regal_policy"  # metadata "kind" of a policy export


def load_policy(path: str | Path) -> tuple[Policy, dict]:
    """``(policy, metadata)`` from a policy export or a training checkpoint / run directory.

    Raises ``ValueError`` naming the path (and how to train one) when there is none.
    """
    from gsched.training import (CheckpointError, config_from_dict, load_checkpoint,
                                 read_checkpoint_metadata)
    from gsched.regal.reinforce import (ReinforceConfig, init_models, init_state, models_of)

    path = Path(path)
    if not path.exists():
        raise ValueError(
            f"no REGAL checkpoint at {path}; train one with `make train` (python -m train.regal "
            "--config train/configs/regal_small.toml --run-dir DIR) and pass "
            "--checkpoint DIR/policy (or copy it there)")
    try:
        meta = read_checkpoint_metadata(path)
        config = meta["config"]
        policy_config = config_from_dict(PolicyConfig, config["policy"], source=str(path))
        models = init_models(policy_config, jax.random.key(0))
        if meta.get("kind") == POLICY_KIND:
            policy, _ = load_checkpoint(path, models[0])
        else:
            rl = config_from_dict(ReinforceConfig, config["reinforce"], source=str(path))
            state, _ = load_checkpoint(path, init_state(models, rl, jax.random.key(0)))
            policy = models_of(state.params, models)[0]
    except (CheckpointError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: not a REGAL policy checkpoint ({err})") from None
    return policy, meta


def _build(name: str, search: str, encoder: str, checkpoint: str | Path | None = None,
           decode: str = "greedy"):
    if decode not in DECODINGS:
        raise ValueError(f"method {name}: --decode must be one of {DECODINGS}, got {decode!r}")
    checkpoint = DEFAULT_CHECKPOINTS[name] if checkpoint is None else checkpoint
    policy, meta = load_policy(checkpoint)
    feature_evals = int(meta["config"].get("feature_evals", FEATURE_EVALS))
    found = "lstm" if isinstance(policy.encoder, SequenceEncoder) else "gnn"
    if found != encoder:
        raise ValueError(f"method {name} needs a policy with encoder {encoder!r}, the checkpoint "
                         f"{checkpoint} has {found!r}")
    return functools.partial(_run, policy, decode, search, feature_evals)


def _run(policy, decoding, search, feature_evals, key, graphs, cost_params, *, num_devices,
         budget, objective):
    return guided_search(key, policy, graphs, cost_params, num_devices=num_devices,
                         budget=budget, objective=objective, decoding=decoding, search=search,
                         feature_evals=feature_evals)


build_regal = functools.partial(_build, "regal", "brkga", "gnn")
build_gas = functools.partial(_build, "gas", "brkga", "lstm")
build_idrs = functools.partial(_build, "idrs", "random", "gnn")
