"""WaveNet (van den Oord et al. 2016, "WaveNet: a generative model for raw audio"; the WaveNet
workload of GDP and GO).

One-hot μ-law samples → a causal convolution → ``stacks × layers_per_stack`` residual layers
with dilations ``1, 2, 4, …, 2^(layers_per_stack - 1)`` per stack. Each layer: a dilated
causal convolution (kernel 2, left padding only) for the filter and for the gate, the gated
activation ``tanh(filter) · σ(gate)``, a 1x1 convolution into the residual path (added to the
layer's input) and one into the skip path (summed over layers). Output: ReLU → 1x1 → ReLU →
1x1 → per-sample logits over the quantization levels; training predicts the next sample.
Scopes ``layer_{i}/dilated_conv``, ``layer_{i}/gate``, ``layer_{i}/residual``,
``layer_{i}/skip``.

``medium`` is close to the paper's setting (4 stacks of 10, dilations up to 512); ``large``
stacks many more (a 10k-op graph; deeper than any published WaveNet). At the HLO level XLA's
CPU compile time grows quadratically with depth (its fusion recomputes the residual chain per
layer; docs/workloads.md), so ``large`` is for the jaxpr level.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gsched.workloads import layers as L

CONFIGS = {
    "small": {"stacks": 2, "layers_per_stack": 6, "residual": 4, "skip": 8, "levels": 16,
              "samples": 32, "batch": 2},
    "medium": {"stacks": 4, "layers_per_stack": 10, "residual": 4, "skip": 8, "levels": 16,
               "samples": 32, "batch": 2},
    "large": {"stacks": 48, "layers_per_stack": 10, "residual": 4, "skip": 8, "levels": 16,
              "samples": 32, "batch": 2},
}


def causal_conv(w, x, dilation: int = 1):
    """``x [batch, time, in]`` convolved with ``w [kernel, in, out]``, output ``t`` seeing
    inputs ``≤ t`` only (left padding ``dilation · (kernel - 1)``)."""
    pad = dilation * (w.shape[0] - 1)
    return jax.lax.conv_general_dilated(x, w, (1,), [(pad, 0)], rhs_dilation=(dilation,),
                                        dimension_numbers=("NWC", "WIO", "NWC"))


def spec(cfg: dict) -> dict:
    r, s, q = cfg["residual"], cfg["skip"], cfg["levels"]
    n = cfg["stacks"] * cfg["layers_per_stack"]
    return {"input": L.weight(2, q, r),
            "layers": [{"filter": L.weight(2, r, r), "filter_b": L.zeros(r),
                        "gate": L.weight(2, r, r), "gate_b": L.zeros(r),
                        "residual": L.weight(1, r, r), "residual_b": L.zeros(r),
                        "skip": L.weight(1, r, s), "skip_b": L.zeros(s)} for _ in range(n)],
            "out1": L.weight(1, s, s), "out1_b": L.zeros(s),
            "out2": L.weight(1, s, q), "out2_b": L.zeros(q)}


def forward(params: dict, audio, cfg: dict):
    """Logits ``[batch, samples, levels]`` of quantized ``audio [batch, samples]``."""
    with jax.named_scope("input"):
        x = causal_conv(params["input"], jax.nn.one_hot(audio, cfg["levels"]))
    skips = None
    for i, p in enumerate(params["layers"]):
        dilation = 2 ** (i % cfg["layers_per_stack"])
        with jax.named_scope(f"layer_{i}"):
            with jax.named_scope("dilated_conv"):
                f = causal_conv(p["filter"], x, dilation) + p["filter_b"]
                g = causal_conv(p["gate"], x, dilation) + p["gate_b"]
            with jax.named_scope("gate"):
                z = jnp.tanh(f) * jax.nn.sigmoid(g)
            with jax.named_scope("skip"):
                s = causal_conv(p["skip"], z) + p["skip_b"]
                skips = s if skips is None else skips + s
            with jax.named_scope("residual"):
                x = x + causal_conv(p["residual"], z) + p["residual_b"]
    with jax.named_scope("output"):
        h = causal_conv(params["out1"], jax.nn.relu(skips)) + params["out1_b"]
        return causal_conv(params["out2"], jax.nn.relu(h)) + params["out2_b"]


def build(size: str, mode: str):
    cfg = CONFIGS[size]
    audio = L.tokens((cfg["batch"], cfg["samples"] + 1), cfg["levels"], salt=1)
    inputs, targets = audio[:, :-1], audio[:, 1:]

    def fwd(params, audio):
        return forward(params, audio, cfg)

    def loss(params, audio, targets):
        return L.cross_entropy(forward(params, audio, cfg), targets)

    return L.model_program(f"wavenet_{size}_{mode}", mode, spec(cfg), (inputs,), targets,
                           fwd, loss)
