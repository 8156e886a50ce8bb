"""REGAL's quantized actions (appendix A.2) and their mapping to per-gene BRKGA parameters.

Each node ``v`` takes a sub-action ``y_v``: a vector of categorical variables over ``k``
levels ``{0, …, k − 1}``, laid out (only the *learned* groups are present, Table 3):

* placement: for every device ``d``, ``(m, v)`` of the Beta of affinity gene ``(v, d)``;
* scheduling: ``(m, v)`` of the Beta of the node's priority gene;
* elite bias: ``c`` of the node's crossover probability, applied to all of its genes
  (its ``D`` affinities and its priority).

Dequantization is exactly A.2: ``μ = (m + 1)/(k + 1)``, ``σ² = μ(1 − μ)(v + 1)/(k + 1)``,
``β = μ(1 − μ)²/σ² − 1 + μ``, ``α = β·μ/(1 − μ)`` and ``ρ = 0.5·(1 + c/k)``. Groups that are
not learned, padded nodes and the transfer genes keep standard BRKGA values (``Beta(1, 1)``,
``ρ = 0.7``); the zero-shot paper (A.2) likewise learns only the affinity and priority parts.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from gsched.search.brkga import BRKGAParams

UNIFORM_ELITE_BIAS = 0.7  # standard BRKGA's ρ (REGAL §4.2)
GROUPS = ("placement", "scheduling", "elite_bias")


@dataclasses.dataclass(frozen=True)
class ActionSpace:
    """The static shape of a node's sub-action.

    Attributes:
      num_devices: ``D``.
      levels: ``k`` quantization levels of every categorical variable (``k ≥ 2``).
      learned: which action groups the policy outputs (a subset of :data:`GROUPS`).
    """

    num_devices: int
    levels: int = 2
    learned: tuple[str, ...] = ("placement", "scheduling")

    def __post_init__(self):
        if self.num_devices < 1:
            raise ValueError(f"num_devices must be >= 1, got {self.num_devices}")
        if self.levels < 2:
            raise ValueError(f"levels (k) must be >= 2, got {self.levels}")
        unknown = sorted(set(self.learned) - set(GROUPS))
        if unknown or not self.learned:
            raise ValueError(f"learned must be a non-empty subset of {GROUPS}, got "
                             f"{self.learned!r}")
        object.__setattr__(self, "learned", tuple(g for g in GROUPS if g in self.learned))

    @property
    def num_vars(self) -> int:
        """Categorical variables per node."""
        sizes = {"placement": 2 * self.num_devices, "scheduling": 2, "elite_bias": 1}
        return sum(sizes[g] for g in self.learned)

    def slices(self) -> dict[str, slice]:
        """Column range of each learned group in an action ``[..., num_vars]``."""
        sizes = {"placement": 2 * self.num_devices, "scheduling": 2, "elite_bias": 1}
        out, start = {}, 0
        for group in self.learned:
            out[group] = slice(start, start + sizes[group])
            start += sizes[group]
        return out


def dequantize_beta(m: jnp.ndarray, v: jnp.ndarray, levels: int
                    ) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Integer levels ``m, v ∈ {0..k−1}`` → Beta ``(α, β)``, both ``> 0`` (A.2)."""
    k = float(levels)
    mu = (jnp.asarray(m, jnp.float32) + 1.0) / (k + 1.0)
    var = mu * (1.0 - mu) * (jnp.asarray(v, jnp.float32) + 1.0) / (k + 1.0)
    beta = mu * (1.0 - mu) ** 2 / var - 1.0 + mu
    return beta * mu / (1.0 - mu), beta


def quantize_beta(alpha: jnp.ndarray, beta: jnp.ndarray, levels: int
                  ) -> tuple[jnp.ndarray, jnp.ndarray]:
    """The nearest levels ``(m, v)`` of a Beta (inverse of :func:`dequantize_beta`)."""
    alpha, beta = jnp.asarray(alpha, jnp.float32), jnp.asarray(beta, jnp.float32)
    mu = alpha / (alpha + beta)
    var_ratio = 1.0 / (alpha + beta + 1.0)  # σ² / (μ(1 − μ))
    m = jnp.clip(jnp.round(mu * (levels + 1) - 1.0), 0, levels - 1).astype(jnp.int32)
    v = jnp.clip(jnp.round(var_ratio * (levels + 1) - 1.0), 0, levels - 1).astype(jnp.int32)
    return m, v


def dequantize_elite_bias(c: jnp.ndarray, levels: int) -> jnp.ndarray:
    """``c ∈ {0..k−1}`` → crossover probability ``0.5·(1 + c/k) ∈ [0.5, 1)`` (A.2)."""
    return 0.5 * (1.0 + jnp.asarray(c, jnp.float32) / levels)


def quantize_elite_bias(rho: jnp.ndarray, levels: int) -> jnp.ndarray:
    """The nearest level ``c`` of a crossover probability (inverse of the above)."""
    c = jnp.round((2.0 * jnp.asarray(rho, jnp.float32) - 1.0) * levels)
    return jnp.clip(c, 0, levels - 1).astype(jnp.int32)


def to_brkga_params(actions: jnp.ndarray, op_mask: jnp.ndarray, num_tensors: int,
                    space: ActionSpace) -> BRKGAParams:
    """Node actions ``[N, num_vars]`` int32 → :class:`BRKGAParams` ``[L]`` in the padded
    chromosome layout (``L = N·D + N + T·D``, ``T = num_tensors``). Padded nodes (``op_mask``
    False) and every group not in ``space.learned`` get standard BRKGA values."""
    n, d = actions.shape[0], space.num_devices
    cols = space.slices()
    ones_nd, ones_n = jnp.ones((n, d), jnp.float32), jnp.ones((n,), jnp.float32)
    aff_a, aff_b, prio_a, prio_b = ones_nd, ones_nd, ones_n, ones_n
    rho = jnp.full((n,), UNIFORM_ELITE_BIAS, jnp.float32)
    real = op_mask.astype(bool)
    if "placement" in cols:
        levels = actions[:, cols["placement"]].reshape(n, d, 2)
        a, b = dequantize_beta(levels[..., 0], levels[..., 1], space.levels)
        aff_a, aff_b = (jnp.where(real[:, None], x, 1.0) for x in (a, b))
    if "scheduling" in cols:
        levels = actions[:, cols["scheduling"]]
        a, b = dequantize_beta(levels[:, 0], levels[:, 1], space.levels)
        prio_a, prio_b = (jnp.where(real, x, 1.0) for x in (a, b))
    if "elite_bias" in cols:
        rho = jnp.where(real, dequantize_elite_bias(actions[:, cols["elite_bias"]][:, 0],
                                                    space.levels), UNIFORM_ELITE_BIAS)
    xfer = jnp.ones((num_tensors * d,), jnp.float32)
    return BRKGAParams(
        elite_bias=jnp.concatenate([jnp.repeat(rho, d), rho, UNIFORM_ELITE_BIAS * xfer]),
        alpha=jnp.concatenate([aff_a.reshape(-1), prio_a, xfer]),
        beta=jnp.concatenate([aff_b.reshape(-1), prio_b, xfer]))
