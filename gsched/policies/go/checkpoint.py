"""GDP / GO policy checkpoints: exports (metadata ``kind = "go_policy"``) written by
``python -m train.gdp`` / ``train.go`` to ``<run_dir>/policy`` (a run directory stands for its
export), and the small policies shipped in ``checkpoints/`` (MODEL_CARD.md). An export holds
the network and, in its metadata, everything that rebuilds and runs it: the network config, the
action space, the PPO settings (for fine-tuning) and the execution model it was trained under.
Loading imports orbax (:mod:`gsched.infra.checkpoint`), so it happens on demand.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import jax

from gsched.policies.go.actions import ActionSpace
from gsched.policies.go.network import NetworkConfig, PolicyNetwork
from gsched.policies.go.ppo import PPOConfig

CHECKPOINTS = Path(__file__).parent / "checkpoints"
DEFAULT_CHECKPOINTS = {"gdp": CHECKPOINTS / "gdp", "go": CHECKPOINTS / "go"}
POLICY_KIND = "go_policy"
POLICY_DIR = "policy"


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    """What a checkpoint's network is and how it was trained to run."""

    network: NetworkConfig
    space: ActionSpace
    ppo: PPOConfig
    scheduler: str  # the SPEC §8.2 scheduler of its training
    fusion: bool


def train_hint(method: str) -> str:
    return (f"train one with `python -m train.{method} --config "
            f"train/configs/{method}_small.toml --run-dir DIR` and pass --checkpoint DIR")


def network_template(spec: PolicySpec, key: jax.Array | None = None) -> PolicyNetwork:
    """A network of ``spec``'s shape (initial parameters from ``key``, default key 0)."""
    return PolicyNetwork(spec.network, tasks=spec.space.tasks,
                         num_actions=spec.space.num_actions,
                         key=jax.random.key(0) if key is None else key)


def save_policy(path: str | Path, net: PolicyNetwork, spec: PolicySpec,
                extra: dict[str, Any] | None = None) -> None:
    """Exports ``net`` with ``spec`` at ``path`` (which must not exist)."""
    from gsched.infra.checkpoint import save_checkpoint
    from gsched.infra.config import config_to_dict

    save_checkpoint(path, net, {"kind": POLICY_KIND, "spec": config_to_dict(spec),
                                **(extra or {})})


def load_policy(path: str | Path, method: str = "go") -> tuple[PolicyNetwork, PolicySpec, dict]:
    """``(network, spec, metadata)`` of a policy export, a run directory holding one or a
    shipped checkpoint's name (``"go"``, ``"gdp"``); a missing or foreign checkpoint raises
    ``ValueError`` naming the path and how to train one."""
    from gsched.infra.checkpoint import (
        CheckpointError,
        load_checkpoint,
        read_checkpoint_metadata,
        shipped_or_path,
    )
    from gsched.infra.config import ConfigError, config_from_dict

    path = shipped_or_path(path, CHECKPOINTS)
    if (path / POLICY_DIR).is_dir():
        path = path / POLICY_DIR
    if not path.exists():
        raise ValueError(f"no {method} policy checkpoint at {path}; {train_hint(method)}")
    try:
        meta = read_checkpoint_metadata(path)
        if meta.get("kind") != POLICY_KIND:
            raise ValueError(f"{path} is not a GDP/GO policy export (kind "
                             f"{meta.get('kind')!r}); {train_hint(method)}")
        spec = config_from_dict(PolicySpec, meta["spec"], source=str(path))
        net, _ = load_checkpoint(path, network_template(spec))
    except (CheckpointError, ConfigError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: not a readable GDP/GO policy checkpoint ({err})") from None
    return net, spec, meta
