"""Inception-v3 (Szegedy et al. 2016, "Rethinking the Inception architecture for computer
vision"; the Inception workload of GDP and GO).

The paper's network with its channel widths divided by 16: a stem of five conv–BN–ReLU layers
and two max-pools; ``A`` blocks (1x1 / 1x1→5x5 / 1x1→3x3→3x3 / avg-pool→1x1 branches,
concatenated); the grid reduction ``B`` (3x3 stride 2 / 1x1→3x3→3x3 stride 2 / max-pool);
``C`` blocks (factorized 1x7, 7x1 convolutions); the reduction ``D``; ``E`` blocks (expanded
1x3 / 3x1 filter banks); global average pooling and a classifier. Branch layout as in
torchvision's ``inception_v3``. ``medium`` is the paper's block sequence (3 A, B, 4 C, D,
2 E: 94 convolutions); ``small`` has one A, B, D and E block (no C); ``large`` has ten times
the A, C and E blocks (a deeper Inception-v3-style network, to reach a 10k-op graph).

Every block and stem convolution is one ``layer_{i}`` scope, its branches sub-scopes
(``layer_{i}/branch_3x3dbl``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gsched.workloads import layers as L

CONFIGS = {
    "small": {"repeats": (1, 0, 1), "width": 16, "image": 32, "classes": 10, "batch": 2},
    "medium": {"repeats": (3, 4, 2), "width": 16, "image": 32, "classes": 10, "batch": 2},
    "large": {"repeats": (30, 40, 20), "width": 16, "image": 32, "classes": 10, "batch": 2},
}


class _Spec:
    """Builds the parameter spec and the block list together (channel bookkeeping)."""

    def __init__(self, width: int):
        self.div = width

    def c(self, channels: int) -> int:
        return max(1, channels // self.div)


def _cbr(kh, kw, c_in, c_out):
    return L.conv_bn_params(kh, kw, c_in, c_out)


def block_a(s: _Spec, c_in: int, pool: int):
    p = {"b1x1": _cbr(1, 1, c_in, s.c(64)),
         "b5x5_1": _cbr(1, 1, c_in, s.c(48)), "b5x5_2": _cbr(5, 5, s.c(48), s.c(64)),
         "b3x3dbl_1": _cbr(1, 1, c_in, s.c(64)), "b3x3dbl_2": _cbr(3, 3, s.c(64), s.c(96)),
         "b3x3dbl_3": _cbr(3, 3, s.c(96), s.c(96)), "pool": _cbr(1, 1, c_in, s.c(pool))}
    return p, s.c(64) + s.c(64) + s.c(96) + s.c(pool)


def apply_a(p, x):
    with jax.named_scope("branch_1x1"):
        b1 = L.conv_bn_relu(p["b1x1"], x)
    with jax.named_scope("branch_5x5"):
        b5 = L.conv_bn_relu(p["b5x5_2"], L.conv_bn_relu(p["b5x5_1"], x))
    with jax.named_scope("branch_3x3dbl"):
        b3 = L.conv_bn_relu(p["b3x3dbl_1"], x)
        b3 = L.conv_bn_relu(p["b3x3dbl_3"], L.conv_bn_relu(p["b3x3dbl_2"], b3))
    with jax.named_scope("branch_pool"):
        bp = L.conv_bn_relu(p["pool"], L.avg_pool(x))
    return jnp.concatenate([b1, b5, b3, bp], axis=-1)


def block_b(s: _Spec, c_in: int):
    p = {"b3x3": _cbr(3, 3, c_in, s.c(384)),
         "b3x3dbl_1": _cbr(1, 1, c_in, s.c(64)), "b3x3dbl_2": _cbr(3, 3, s.c(64), s.c(96)),
         "b3x3dbl_3": _cbr(3, 3, s.c(96), s.c(96))}
    return p, s.c(384) + s.c(96) + c_in


def apply_b(p, x):
    with jax.named_scope("branch_3x3"):
        b3 = L.conv_bn_relu(p["b3x3"], x, stride=2)
    with jax.named_scope("branch_3x3dbl"):
        bd = L.conv_bn_relu(p["b3x3dbl_2"], L.conv_bn_relu(p["b3x3dbl_1"], x))
        bd = L.conv_bn_relu(p["b3x3dbl_3"], bd, stride=2)
    with jax.named_scope("branch_pool"):
        bp = L.max_pool(x, 3, 2)
    return jnp.concatenate([b3, bd, bp], axis=-1)


def block_c(s: _Spec, c_in: int, c7: int):
    c7 = s.c(c7)
    p = {"b1x1": _cbr(1, 1, c_in, s.c(192)),
         "b7x7_1": _cbr(1, 1, c_in, c7), "b7x7_2": _cbr(1, 7, c7, c7),
         "b7x7_3": _cbr(7, 1, c7, s.c(192)),
         "b7x7dbl_1": _cbr(1, 1, c_in, c7), "b7x7dbl_2": _cbr(7, 1, c7, c7),
         "b7x7dbl_3": _cbr(1, 7, c7, c7), "b7x7dbl_4": _cbr(7, 1, c7, c7),
         "b7x7dbl_5": _cbr(1, 7, c7, s.c(192)), "pool": _cbr(1, 1, c_in, s.c(192))}
    return p, 4 * s.c(192)


def apply_c(p, x):
    with jax.named_scope("branch_1x1"):
        b1 = L.conv_bn_relu(p["b1x1"], x)
    with jax.named_scope("branch_7x7"):
        b7 = x
        for k in ("b7x7_1", "b7x7_2", "b7x7_3"):
            b7 = L.conv_bn_relu(p[k], b7)
    with jax.named_scope("branch_7x7dbl"):
        bd = x
        for k in ("b7x7dbl_1", "b7x7dbl_2", "b7x7dbl_3", "b7x7dbl_4", "b7x7dbl_5"):
            bd = L.conv_bn_relu(p[k], bd)
    with jax.named_scope("branch_pool"):
        bp = L.conv_bn_relu(p["pool"], L.avg_pool(x))
    return jnp.concatenate([b1, b7, bd, bp], axis=-1)


def block_d(s: _Spec, c_in: int):
    p = {"b3x3_1": _cbr(1, 1, c_in, s.c(192)), "b3x3_2": _cbr(3, 3, s.c(192), s.c(320)),
         "b7x7x3_1": _cbr(1, 1, c_in, s.c(192)), "b7x7x3_2": _cbr(1, 7, s.c(192), s.c(192)),
         "b7x7x3_3": _cbr(7, 1, s.c(192), s.c(192)),
         "b7x7x3_4": _cbr(3, 3, s.c(192), s.c(192))}
    return p, s.c(320) + s.c(192) + c_in


def apply_d(p, x):
    with jax.named_scope("branch_3x3"):
        b3 = L.conv_bn_relu(p["b3x3_2"], L.conv_bn_relu(p["b3x3_1"], x), stride=2)
    with jax.named_scope("branch_7x7x3"):
        b7 = x
        for k in ("b7x7x3_1", "b7x7x3_2", "b7x7x3_3"):
            b7 = L.conv_bn_relu(p[k], b7)
        b7 = L.conv_bn_relu(p["b7x7x3_4"], b7, stride=2)
    with jax.named_scope("branch_pool"):
        bp = L.max_pool(x, 3, 2)
    return jnp.concatenate([b3, b7, bp], axis=-1)


def block_e(s: _Spec, c_in: int):
    p = {"b1x1": _cbr(1, 1, c_in, s.c(320)),
         "b3x3_1": _cbr(1, 1, c_in, s.c(384)), "b3x3_2a": _cbr(1, 3, s.c(384), s.c(384)),
         "b3x3_2b": _cbr(3, 1, s.c(384), s.c(384)),
         "b3x3dbl_1": _cbr(1, 1, c_in, s.c(448)), "b3x3dbl_2": _cbr(3, 3, s.c(448), s.c(384)),
         "b3x3dbl_3a": _cbr(1, 3, s.c(384), s.c(384)),
         "b3x3dbl_3b": _cbr(3, 1, s.c(384), s.c(384)), "pool": _cbr(1, 1, c_in, s.c(192))}
    return p, s.c(320) + 4 * s.c(384) + s.c(192)


def apply_e(p, x):
    with jax.named_scope("branch_1x1"):
        b1 = L.conv_bn_relu(p["b1x1"], x)
    with jax.named_scope("branch_3x3"):
        b3 = L.conv_bn_relu(p["b3x3_1"], x)
        b3 = jnp.concatenate([L.conv_bn_relu(p["b3x3_2a"], b3),
                              L.conv_bn_relu(p["b3x3_2b"], b3)], axis=-1)
    with jax.named_scope("branch_3x3dbl"):
        bd = L.conv_bn_relu(p["b3x3dbl_2"], L.conv_bn_relu(p["b3x3dbl_1"], x))
        bd = jnp.concatenate([L.conv_bn_relu(p["b3x3dbl_3a"], bd),
                              L.conv_bn_relu(p["b3x3dbl_3b"], bd)], axis=-1)
    with jax.named_scope("branch_pool"):
        bp = L.conv_bn_relu(p["pool"], L.avg_pool(x))
    return jnp.concatenate([b1, b3, bd, bp], axis=-1)


STEM = [  # (kernel, channels, stride, max-pool after)
    (3, 32, 2, False), (3, 32, 1, False), (3, 64, 1, True), (1, 80, 1, False),
    (3, 192, 1, True)]


def architecture(cfg: dict):
    """``(spec, layers)``: the parameter spec and the layer list ``[(kind, index), ...]``
    (``index`` into ``spec["layers"]``)."""
    s = _Spec(cfg["width"])
    n_a, n_c, n_e = cfg["repeats"]
    specs, kinds = [], []
    c = 3
    for k, ch, _, _ in STEM:
        specs.append(_cbr(k, k, c, s.c(ch)))
        kinds.append("stem")
        c = s.c(ch)
    for j in range(n_a):
        p, c = block_a(s, c, 32 if j == 0 else 64)
        specs.append(p)
        kinds.append("a")
    p, c = block_b(s, c)
    specs.append(p)
    kinds.append("b")
    for j in range(n_c):
        p, c = block_c(s, c, (128, 160, 160, 192)[min(j, 3)])
        specs.append(p)
        kinds.append("c")
    p, c = block_d(s, c)
    specs.append(p)
    kinds.append("d")
    for _ in range(n_e):
        p, c = block_e(s, c)
        specs.append(p)
        kinds.append("e")
    spec = {"layers": specs, "classifier": L.dense_params(c, cfg["classes"])}
    return spec, kinds


APPLY = {"a": apply_a, "b": apply_b, "c": apply_c, "d": apply_d, "e": apply_e}


def forward(params: dict, images, kinds):
    """Class logits ``[batch, classes]`` of NHWC ``images``."""
    x = images
    stem = 0
    for i, (kind, p) in enumerate(zip(kinds, params["layers"])):
        with jax.named_scope(f"layer_{i}"):
            if kind == "stem":
                _, _, stride, pool = STEM[stem]
                stem += 1
                x = L.conv_bn_relu(p, x, stride)
                if pool:
                    x = L.max_pool(x, 3, 2)
            else:
                with jax.named_scope(f"inception_{kind}"):
                    x = APPLY[kind](p, x)
    with jax.named_scope("classifier"):
        return L.dense(params["classifier"], jnp.mean(x, axis=(1, 2)))


def build(size: str, mode: str):
    cfg = CONFIGS[size]
    spec, kinds = architecture(cfg)
    images = L.normal_data((cfg["batch"], cfg["image"], cfg["image"], 3), salt=1)
    labels = L.tokens((cfg["batch"],), cfg["classes"], salt=2)

    def fwd(params, images):
        return forward(params, images, kinds)

    def loss(params, images, labels):
        return L.cross_entropy(forward(params, images, kinds), labels)

    return L.model_program(f"inception_{size}_{mode}", mode, spec, (images,), labels, fwd,
                           loss)
