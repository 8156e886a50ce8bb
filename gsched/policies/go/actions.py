"""GO's and GDP's per-op actions and how they become a chromosome of SPEC §2 / §8.3.

The policy emits, for every op and every task of its :class:`ActionSpace`, a categorical
distribution (GO §3): a device (``placement``, ``D`` choices), a scheduling priority level
(``schedule``, ``P`` levels) and a fusion priority level (``fusion``, ``F`` levels). All ops are
decided at once (non-autoregressive, GO eq. 2 / GDP eq. 4), so a joint action's log-probability
is the sum of the per-op, per-task log-probabilities over the real ops.

**Decoding into keys** (:func:`to_keys`, the padded layout ``N·D + N + T·D [+ N]``):

* placement: the chosen device's affinity 1, the others 0 (SPEC §2: the largest affinity wins);
* op priority: level ``p`` → ``p / (P − 1)`` (a higher level runs earlier; ties inside a level
  fall to SPEC's rules: op index under ``list`` / ``priority``, ready time then op index under
  ``fifo``); a transfer ``X(t, d)`` takes the priority of the producer of ``t``;
* fusion priority: level ``f`` → ``f / (F − 1)``: the upper half of the levels (key ≥ 0.5) makes
  an op a fusion candidate (SPEC §8.3), visited by descending level.

A task the policy does not learn takes the default of GO Fig. 6's rows: every op on device 0,
every priority 0.5 (SPEC's tie rules alone — what :func:`gsched.search.common.freeze_genes`
calls "placement" genes), and, when the cost model fuses, every fusion key 1 (XLA-style greedy
fusion: TF/XLA's default fusion).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from gsched.core.padding import PaddedGraph
from gsched.policies.go.network import TASKS


@dataclasses.dataclass(frozen=True)
class ActionSpace:
    """Which tasks the policy decides (an ordered subset of :data:`TASKS`) and their sizes."""

    tasks: tuple[str, ...] = ("placement",)
    num_devices: int = 2
    priority_levels: int = 8
    fusion_levels: int = 2

    def __post_init__(self):
        tasks = tuple(self.tasks)
        object.__setattr__(self, "tasks", tasks)
        if not tasks or len(set(tasks)) != len(tasks) or any(t not in TASKS for t in tasks):
            raise ValueError(f"tasks must be distinct names from {TASKS}, got {tasks!r}")
        if tasks != tuple(t for t in TASKS if t in tasks):
            raise ValueError(f"tasks must keep the order {TASKS}, got {tasks!r}")
        for name in ("num_devices", "priority_levels", "fusion_levels"):
            value = getattr(self, name)
            low = 1 if name == "num_devices" else 2
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")

    @property
    def num_actions(self) -> tuple[int, ...]:
        """Choices per op of each task, in ``tasks`` order."""
        sizes = {"placement": self.num_devices, "schedule": self.priority_levels,
                 "fusion": self.fusion_levels}
        return tuple(sizes[t] for t in self.tasks)

    def check_exec_model(self, num_devices: int, fusion: bool) -> None:
        """Refuses a cost-model setting the policy cannot decide for (one-line errors)."""
        if "placement" in self.tasks and num_devices != self.num_devices:
            raise ValueError(f"the policy places ops on {self.num_devices} devices, the run has "
                             f"{num_devices}; train one with policy.num_devices={num_devices}")
        if "fusion" in self.tasks and not fusion:
            raise ValueError("the policy decides fusion; run it with fusion on (--fusion)")

    def search_genes(self, fusion: bool) -> str:
        """The ``genes`` setting (:func:`gsched.search.common.freeze_genes`) under which a
        search varies exactly this policy's genes and holds the others where the policy's
        chromosomes (:func:`to_keys`) hold them; ``ValueError`` if no setting does (a policy
        without placement, one deciding fusion but not scheduling, or one that leaves fusion
        on while not deciding it: its fusion keys are 1, the frozen ones 0)."""
        if "placement" not in self.tasks or ("fusion" in self.tasks) != bool(fusion) \
                or self.tasks == ("placement", "fusion"):
            raise ValueError(f"tasks {self.tasks} with fusion {'on' if fusion else 'off'}: a "
                             f"search cannot be limited to these genes (placement, "
                             f"placement+schedule without fusion, or all three with fusion)")
        return {1: "placement", 2: "placement+schedule", 3: "all"}[len(self.tasks)]


Actions = tuple  # one [N] int32 array per task of the ActionSpace, in its order


def sample(key: jax.Array, logits: tuple, op_mask: jnp.ndarray) -> Actions:
    """One joint action per op from ``logits`` (a ``[N, K_t]`` array per task); padded ops get
    action 0."""
    keys = jax.random.split(key, len(logits))
    return tuple(jnp.where(op_mask, jax.random.categorical(k, lg, axis=-1), 0).astype(jnp.int32)
                 for k, lg in zip(keys, logits))


def greedy(logits: tuple, op_mask: jnp.ndarray) -> Actions:
    """The most likely action of every op and task (padded ops: 0)."""
    return tuple(jnp.where(op_mask, jnp.argmax(lg, axis=-1), 0).astype(jnp.int32)
                 for lg in logits)


def op_log_probs(logits: tuple, actions: Actions, op_mask: jnp.ndarray) -> jnp.ndarray:
    """``[N]`` log-probability of each op's actions (summed over tasks; 0 on padded ops)."""
    total = 0.0
    for lg, a in zip(logits, actions):
        logp = jax.nn.log_softmax(lg, axis=-1)
        total = total + jnp.take_along_axis(logp, a[:, None], axis=-1)[:, 0]
    return jnp.where(op_mask, total, 0.0)


def entropy(logits: tuple, op_mask: jnp.ndarray) -> jnp.ndarray:
    """Mean over real ops of the summed per-task entropies (a scalar)."""
    total = 0.0
    for lg in logits:
        logp = jax.nn.log_softmax(lg, axis=-1)
        total = total - jnp.sum(jnp.exp(logp) * logp, axis=-1)
    mask = op_mask.astype(jnp.float32)
    return jnp.sum(total * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def to_keys(actions: Actions, graph: PaddedGraph, space: ActionSpace, *, num_devices: int,
            fusion: bool) -> jnp.ndarray:
    """One graph's chromosome (padded layout, ``[L]`` float32) from its actions; see the
    module docstring for the decoding and the defaults of undecided tasks."""
    chosen = dict(zip(space.tasks, actions))
    n = graph.op_mask.shape[-1]
    device = chosen.get("placement", jnp.zeros(n, jnp.int32))
    affinity = jax.nn.one_hot(device, num_devices, dtype=jnp.float32).reshape(-1)
    if "schedule" in chosen:
        priority = chosen["schedule"].astype(jnp.float32) / (space.priority_levels - 1)
    else:
        priority = jnp.full(n, 0.5, jnp.float32)
    transfer = jnp.repeat(priority[graph.tensor_producer], num_devices)
    parts = [affinity, priority, transfer]
    if fusion:
        if "fusion" in chosen:
            parts.append(chosen["fusion"].astype(jnp.float32) / (space.fusion_levels - 1))
        else:
            parts.append(jnp.ones(n, jnp.float32))
    return jnp.concatenate(parts)
