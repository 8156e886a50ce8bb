"""The learned methods of the registry (``gsched.methods``): ``regal``, ``gas`` and ``idrs``.

Each ``build_*(checkpoint=..., decode=...)`` loads a trained policy and returns a traceable
runner ``fn(key, graphs [B], cost_params, *, num_devices, budget, objective)`` →
:class:`~gsched.search.SearchResult` (:func:`gsched.policies.regal.rollout.guided_search`):

* ``regal`` — the GNN policy's per-node Betas guiding BRKGA (REGAL);
* ``gas`` — the same heads on an LSTM over the topologically sorted nodes (a policy trained
  with ``policy.encoder = "lstm"``);
* ``idrs`` — the REGAL policy's distributions with plain random sampling instead of BRKGA.

The feature search spends the ``feature_evals`` of the checkpoint's training config (400 in
REGAL A.1) of the budget. A checkpoint is a policy export (``train.regal`` writes
``<run_dir>/policy``) or a training run directory / checkpoint (the policy is taken from its
training state). Loading imports orbax (``gsched.infra``), so it happens in ``build``, never
at import. With ``--seed-from`` (beyond the paper) the runner also takes ``seeds [B, S, L]``,
which start the policy's search (:func:`gsched.policies.regal.rollout.pin_seeds`).

Without ``checkpoint`` the shipped policy of the run's objective is used
(``DEFAULT_CHECKPOINTS``; the objective is static, so the choice is made at trace time); an
explicit ``checkpoint`` serves every objective. Either way every result row says which policy
ran and what it was trained for (``checkpoint``, ``policy_objective``: ``LearnedRunner.info``),
so a policy used on the other objective (a transfer, e.g. ``gas`` on runtime) is visible.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

from gsched.costmodel.params import OBJECTIVES
from gsched.policies.regal.checkpoint import DEFAULT_CHECKPOINTS, load_policy
from gsched.policies.regal.gnn import SequenceEncoder
from gsched.policies.regal.policy import Policy
from gsched.policies.regal.rollout import DECODINGS, FEATURE_EVALS, guided_search
from gsched.registry import CHECKPOINT, DECODE, SEED_FROM, Method


@dataclasses.dataclass(frozen=True, eq=False)
class LearnedRunner:
    """A learned method's runner (``gsched.methods`` search kind): per objective, the policy,
    its feature budget and ``info`` (``checkpoint``, ``policy_objective``) for the rows."""

    decoding: str
    search: str
    policies: dict[str, tuple[Policy, int, dict[str, Any]]]  # objective → (policy, evals, info)

    def __call__(self, key, graphs, cost_params, seeds=None, *, num_devices, budget, objective):
        policy, feature_evals, _ = self.policies[objective]
        return guided_search(key, policy, graphs, cost_params, num_devices=num_devices,
                             budget=budget, objective=objective, decoding=self.decoding,
                             search=self.search, feature_evals=feature_evals, seeds=seeds)

    def info(self, objective: str) -> dict[str, Any]:
        """JSON fields added to every result row of a run on ``objective``."""
        return self.policies[objective][2]


def _load(name: str, encoder: str, path: str | Path, label: str):
    """``(policy, feature_evals, info)`` of the checkpoint ``path``, its encoder checked."""
    policy, meta = load_policy(path)
    config = meta["config"]
    found = "lstm" if isinstance(policy.encoder, SequenceEncoder) else "gnn"
    if found != encoder:
        raise ValueError(f"method {name} needs a policy with encoder {encoder!r}, the checkpoint "
                         f"{path} has {found!r}")
    from gsched.policies.regal.reinforce import ReinforceConfig
    trained_for = config.get("reinforce", {}).get("objective", ReinforceConfig.objective)
    return (policy, int(config.get("feature_evals", FEATURE_EVALS)),
            {"checkpoint": label, "policy_objective": trained_for})


def _build(name: str, search: str, encoder: str, checkpoint: str | Path | None = None,
           decode: str = "greedy") -> LearnedRunner:
    if decode not in DECODINGS:
        raise ValueError(f"method {name}: --decode must be one of {DECODINGS}, got {decode!r}")
    if checkpoint is None:
        paths = {o: (p, f"shipped:{p.name}") for o, p in DEFAULT_CHECKPOINTS[name].items()}
    else:
        paths = dict.fromkeys(OBJECTIVES, (checkpoint, str(checkpoint)))
    loaded = {}  # each distinct checkpoint is loaded once
    for path, label in dict.fromkeys(paths.values()):
        loaded[path] = _load(name, encoder, path, label)
    return LearnedRunner(decode, search, {o: loaded[p] for o, (p, _) in paths.items()})


build_regal = functools.partial(_build, "regal", "brkga", "gnn")
build_gas = functools.partial(_build, "gas", "brkga", "lstm")
build_idrs = functools.partial(_build, "idrs", "random", "gnn")


METHODS = {
    "regal": Method("REGAL: a GNN policy's per-node Betas guide BRKGA (400 evals of features)",
                    "search", build_regal, options=(CHECKPOINT, DECODE, SEED_FROM)),
    "gas": Method("GAS: REGAL's heads on an LSTM over the topologically sorted nodes",
                  "search", build_gas, options=(CHECKPOINT, DECODE, SEED_FROM)),
    "idrs": Method("IDRS: the REGAL policy's Betas with plain random sampling, no BRKGA",
                   "search", build_idrs, options=(CHECKPOINT, DECODE, SEED_FROM)),
}
