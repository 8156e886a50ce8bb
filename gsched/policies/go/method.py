"""The ``gdp`` and ``go`` methods of the registry (``gsched.methods``).

``build_*(checkpoint=..., decode=..., finetune_steps=...)`` loads a trained policy and returns
a :class:`PolicyRunner`: a traceable ``runner(key, graphs [B], cost_params, *, num_devices,
budget, objective, scheduler, fusion)`` → :class:`~gsched.search.SearchResult`
(:func:`gsched.policies.go.rollout.policy_search`: zero-shot greedy decoding, optional
fine-tuning, then the rest of the budget sampled or spent on a search started from the
policy's best solution: ``decode`` greedy / sample / brkga / local_search / annealing; with
``--seed-from``, that search also starts from those heuristics' solutions, ``seeds [B, S,
L]``). Both take the execution model of SPEC §8
(``exec_model``); a policy that decides fusion needs ``fusion`` on, and a placement policy
places on the number of devices it was trained for (one-line errors otherwise).

* ``gdp`` — GDP: GraphSAGE + segment-recurrent attention placer with superposition, placement
  only (the schedule is the run's scheduler with SPEC's tie rules; GDP used TF's FIFO);
* ``go`` — GO: the same network with GO's multi-task recurrent attention layers and iterative
  refinement, deciding placement, scheduling priorities and fusion priorities.

Without ``checkpoint`` the shipped policy of the method is used (``checkpoints/``, MODEL_CARD.md).
Every result row names the checkpoint and what it was trained under (``info``).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from gsched.policies.go.checkpoint import DEFAULT_CHECKPOINTS, PolicySpec, load_policy
from gsched.policies.go.network import PolicyNetwork
from gsched.policies.go.ppo import ExecModel
from gsched.policies.go.rollout import DECODINGS, evaluations_needed, policy_search
from gsched.registry import CHECKPOINT, DECODE, SEED_FROM, Method, Option

FINETUNE_STEPS = Option("finetune_steps", int, "gdp/go: PPO fine-tuning iterations on each "
                                               "graph before decoding (default 0: zero-shot)")
TEMPERATURE = Option("temperature", float, "gdp/go: sampling temperature of fine-tuning and "
                                           "--decode sample (default: the checkpoint's, 1)")


@dataclasses.dataclass(frozen=True, eq=False)
class PolicyRunner:
    """A GDP / GO method's runner (``gsched.methods`` search kind)."""

    net: PolicyNetwork
    spec: PolicySpec
    decoding: str
    finetune_steps: int
    fields: dict[str, Any]

    def __call__(self, key, graphs, cost_params, seeds=None, *, num_devices, budget, objective,
                 scheduler="list", fusion=False):
        return policy_search(key, self.net, graphs, cost_params, space=self.spec.space,
                             exec_model=ExecModel(num_devices, scheduler, fusion),
                             config=self.spec.ppo, budget=budget, objective=objective,
                             decode=self.decoding, finetune_steps=self.finetune_steps,
                             seeds=seeds)

    def info(self, objective: str) -> dict[str, Any]:
        """JSON fields added to every result row."""
        return self.fields


def _build(name: str, checkpoint: str | None = None, decode: str = "greedy",
           finetune_steps: int = 0, temperature: float | None = None) -> PolicyRunner:
    if decode not in DECODINGS:
        raise ValueError(f"method {name}: --decode must be one of {DECODINGS}, got {decode!r}")
    path = DEFAULT_CHECKPOINTS[name] if checkpoint is None else checkpoint
    net, spec, meta = load_policy(path, name)
    evaluations_needed(spec.ppo, decode, finetune_steps)  # checks finetune_steps
    if temperature is not None:  # PPOConfig checks it
        spec = dataclasses.replace(spec, ppo=dataclasses.replace(spec.ppo,
                                                                 temperature=temperature))
    label = f"shipped:{DEFAULT_CHECKPOINTS[name].name}" if checkpoint is None else str(path)
    fields = {"checkpoint": label, "policy_tasks": "+".join(spec.space.tasks),
              "policy_scheduler": spec.scheduler, "policy_objective": spec.ppo.objective,
              "finetune_steps": finetune_steps, "temperature": spec.ppo.temperature}
    return PolicyRunner(net, spec, decode, finetune_steps, fields)


build_gdp = functools.partial(_build, "gdp")
build_go = functools.partial(_build, "go")

METHODS = {
    "gdp": Method("GDP: GraphSAGE + segment-recurrent attention placer with superposition, "
                  "PPO-trained; zero-shot or fine-tuned", "search", build_gdp,
                  options=(CHECKPOINT, DECODE, FINETUNE_STEPS, TEMPERATURE, SEED_FROM),
                  exec_model=True),
    "go": Method("GO: GDP's network with multi-task recurrent attention layers and iterative "
                 "refinement: placement, scheduling and fusion priorities", "search", build_go,
                 options=(CHECKPOINT, DECODE, FINETUNE_STEPS, TEMPERATURE, SEED_FROM),
                  exec_model=True),
}
