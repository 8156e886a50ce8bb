"""REGAL policy checkpoints: the shipped policies (``checkpoints/``, MODEL_CARD.md), policy
exports (metadata ``kind = "regal_policy"``; ``python -m train.regal`` writes
``<run_dir>/policy``) and training runs. Loading imports orbax (:mod:`gsched.infra.checkpoint`),
so it happens on demand, never at import.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import jax

from gsched.costmodel.params import OBJECTIVES
from gsched.policies.regal.policy import Policy, PolicyConfig

CHECKPOINTS = Path(__file__).parent / "checkpoints"
# method → objective → shipped policy (MODEL_CARD.md). Peak memory: the policy trained on
# 60–160-op graphs where BRKGA 5K has headroom (``regal_large``, issue #15 §2; ``regal`` is the
# earlier 20–40-op policy). GAS ships a peak-memory policy only, used for runtime too (a
# transfer, visible in the rows' ``policy_objective``).
_REGAL_DEFAULTS = {"peak_memory": CHECKPOINTS / "regal_large",
                   "runtime": CHECKPOINTS / "regal_runtime"}
DEFAULT_CHECKPOINTS = {"regal": _REGAL_DEFAULTS, "idrs": _REGAL_DEFAULTS,
                       "gas": dict.fromkeys(OBJECTIVES, CHECKPOINTS / "gas")}
POLICY_KIND = "regal_policy"  # metadata "kind" of a policy export


def load_policy(path: str | Path) -> tuple[Policy, dict]:
    """``(policy, metadata)`` from a policy export, a training checkpoint / run directory or a
    shipped checkpoint's name (``"regal_runtime"``, a folder of ``checkpoints/``).

    Raises ``ValueError`` naming the path (and how to train one) when there is none.
    """
    from gsched.infra.checkpoint import (
        CheckpointError,
        load_checkpoint,
        read_checkpoint_metadata,
        shipped_or_path,
    )
    from gsched.infra.config import config_from_dict
    from gsched.policies.regal.reinforce import (
        ReinforceConfig,
        init_models,
        init_state,
        models_of,
    )

    path = shipped_or_path(path, CHECKPOINTS)
    if not path.exists():
        raise ValueError(
            f"no REGAL checkpoint at {path}; train one with `make train` (python -m train.regal "
            "--config train/configs/regal_runtime_small.toml --run-dir DIR; regal_small.toml "
            "for peak memory) and pass "
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


def export_policy(run_dir: Path, models, config: Any, template) -> Path:
    """Writes the best (else the latest) policy of the training run ``run_dir`` (state
    ``template``, models ``models``, training ``config`` dataclass) to ``run_dir/policy``."""
    from gsched.infra.checkpoint import load_checkpoint, save_checkpoint
    from gsched.infra.config import config_to_dict
    from gsched.policies.regal.reinforce import models_of

    state, meta = load_checkpoint(run_dir, template)
    target = run_dir / "policy"
    if target.exists():
        shutil.rmtree(target)
    save_checkpoint(target, models_of(state.params, models)[0], {
        "kind": POLICY_KIND, "config": config_to_dict(config), "step": meta["step"],
        "best_value": meta["best_value"]})
    return target
