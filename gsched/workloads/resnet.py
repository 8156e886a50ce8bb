"""ResNet with pre-activation residual units (He et al. 2016, "Deep residual learning for
image recognition" and "Identity mappings in deep residual networks"; an addition to the
GDP/GO workloads, the standard CNN of placement and scheduling benchmarks).

``small``: ResNet-18 (basic 3x3–3x3 units, stages of 2, 2, 2, 2, ImageNet stem: 7x7 stride-2
convolution and max-pool); ``medium``: ResNet-50 (bottleneck 1x1–3x3–1x1 units, stages of
3, 4, 6, 3); ``large``: ResNet-1001 for CIFAR (bottleneck units, three stages of 111, 3x3
stem) — the deepest network of the identity-mappings paper. Each unit is
BN → ReLU → conv (× 2 or 3) plus the shortcut (a 1x1 projection of the pre-activation when the
shape changes). Widths are divided by 16; scopes ``layer_{i}/conv{k}``, ``layer_{i}/shortcut``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gsched.workloads import layers as L

CONFIGS = {
    "small": {"unit": "basic", "stages": (2, 2, 2, 2), "widths": (4, 8, 16, 32),
              "stem": "imagenet", "image": 32, "classes": 10, "batch": 2},
    "medium": {"unit": "bottleneck", "stages": (3, 4, 6, 3), "widths": (4, 8, 16, 32),
               "stem": "imagenet", "image": 32, "classes": 10, "batch": 2},
    "large": {"unit": "bottleneck", "stages": (111, 111, 111), "widths": (1, 2, 4),
              "stem": "cifar", "image": 16, "classes": 10, "batch": 2},
}

EXPANSION = {"basic": 1, "bottleneck": 4}


def architecture(cfg: dict):
    """``(spec, units)``: the parameter spec and per-unit ``(stride, kind)``."""
    unit, grow = cfg["unit"], EXPANSION[cfg["unit"]]
    stem_width = cfg["widths"][0]  # 64 (ImageNet) or 16 (CIFAR), divided by 16
    kernel = 7 if cfg["stem"] == "imagenet" else 3
    spec = {"stem": L.conv_params(kernel, kernel, 3, stem_width), "units": []}
    strides = []
    c = stem_width
    for s, (n, w) in enumerate(zip(cfg["stages"], cfg["widths"])):
        for j in range(n):
            stride = 2 if (j == 0 and s > 0) else 1
            out = w * grow
            if unit == "basic":
                p = {"bn1": L.batch_norm_params(c), "conv1": L.conv_params(3, 3, c, w),
                     "bn2": L.batch_norm_params(w), "conv2": L.conv_params(3, 3, w, w)}
            else:
                p = {"bn1": L.batch_norm_params(c), "conv1": L.conv_params(1, 1, c, w),
                     "bn2": L.batch_norm_params(w), "conv2": L.conv_params(3, 3, w, w),
                     "bn3": L.batch_norm_params(w), "conv3": L.conv_params(1, 1, w, out)}
            if stride != 1 or c != out:
                p["shortcut"] = L.conv_params(1, 1, c, out)
            spec["units"].append(p)
            strides.append(stride)
            c = out
    spec["bn_final"] = L.batch_norm_params(c)
    spec["classifier"] = L.dense_params(c, cfg["classes"])
    return spec, strides


def unit(p: dict, x, stride: int):
    """A pre-activation residual unit (basic or bottleneck, by its parameters)."""
    convs = [k for k in ("conv1", "conv2", "conv3") if k in p]
    pre = jax.nn.relu(L.batch_norm(p["bn1"], x))
    with jax.named_scope("shortcut"):
        short = L.conv(p["shortcut"], pre, stride) if "shortcut" in p else x
    strided = 0 if len(convs) == 2 else 1  # the first 3x3 carries the stride (ResNet v1.5)
    h = pre
    for k, name in enumerate(convs):
        with jax.named_scope(name):
            if k > 0:
                h = jax.nn.relu(L.batch_norm(p[f"bn{k + 1}"], h))
            h = L.conv(p[name], h, stride if k == strided else 1)
    return h + short


def forward(params: dict, images, strides, imagenet_stem: bool):
    with jax.named_scope("stem"):
        if imagenet_stem:
            x = L.max_pool(L.conv(params["stem"], images, 2), 3, 2)
        else:
            x = L.conv(params["stem"], images)
    for i, (p, stride) in enumerate(zip(params["units"], strides)):
        with jax.named_scope(f"layer_{i}"):
            x = unit(p, x, stride)
    with jax.named_scope("classifier"):
        x = jax.nn.relu(L.batch_norm(params["bn_final"], x))
        return L.dense(params["classifier"], jnp.mean(x, axis=(1, 2)))


def build(size: str, mode: str):
    cfg = CONFIGS[size]
    spec, strides = architecture(cfg)
    imagenet = cfg["stem"] == "imagenet"
    images = L.normal_data((cfg["batch"], cfg["image"], cfg["image"], 3), salt=1)
    labels = L.tokens((cfg["batch"],), cfg["classes"], salt=2)

    def fwd(params, images):
        return forward(params, images, strides, imagenet)

    def loss(params, images, labels):
        return L.cross_entropy(forward(params, images, strides, imagenet), labels)

    return L.model_program(f"resnet_{size}_{mode}", mode, spec, (images,), labels, fwd, loss)
