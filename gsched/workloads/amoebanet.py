"""AmoebaNet: a convolutional network of evolved NAS cells (Real et al. 2019, "Regularized
evolution for image classifier architecture search"; the AmoebaNet workload of GDP and GO).

The AmoebaNet-A normal and reduction cells as transcribed in DARTS (Liu et al. 2019,
``genotypes.py``): each cell takes the outputs of the two previous cells (preprocessed by
ReLU–1x1 conv–BN, or a factorized reduction after a reduction cell), builds five hidden states,
each the sum of two operations (separable 3x3/5x5/7x7 convolutions, 3x3 average/max pooling,
identity, a 1x7–7x1 convolution) applied to earlier states, and concatenates the unused ones.
Operations as in DARTS' ``operations.py`` (a separable convolution is ReLU → depthwise →
pointwise → BN, twice). The network: a 3x3 stem, then ``N`` normal cells, a reduction cell,
``N`` normal cells, a reduction cell, ``N`` normal cells (``3N + 2`` cells; ``small`` has one
reduction, ``N = 1``), global average pooling and a classifier. ``medium``: ``N = 6`` as
AmoebaNet-A (N=6); ``large``: ``N = 18`` as GPipe's AmoebaNet-B (18, ·). Each cell is a
``layer_{i}`` scope, its hidden states ``layer_{i}/node_{k}``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gsched.workloads import layers as L

NORMAL = [("avg_pool_3x3", 0), ("max_pool_3x3", 1), ("sep_conv_3x3", 0), ("sep_conv_5x5", 2),
          ("sep_conv_3x3", 0), ("avg_pool_3x3", 3), ("sep_conv_3x3", 1), ("skip_connect", 1),
          ("skip_connect", 0), ("avg_pool_3x3", 1)]
NORMAL_CONCAT = (4, 5, 6)
REDUCE = [("avg_pool_3x3", 0), ("sep_conv_3x3", 1), ("max_pool_3x3", 0), ("sep_conv_7x7", 2),
          ("sep_conv_7x7", 0), ("avg_pool_3x3", 1), ("max_pool_3x3", 0), ("max_pool_3x3", 1),
          ("conv_7x1_1x7", 0), ("sep_conv_3x3", 5)]
REDUCE_CONCAT = (3, 4, 6)

CONFIGS = {
    "small": {"N": 1, "reductions": 1, "channels": 4, "image": 16, "classes": 10, "batch": 2},
    "medium": {"N": 6, "reductions": 2, "channels": 4, "image": 16, "classes": 10, "batch": 2},
    "large": {"N": 18, "reductions": 2, "channels": 4, "image": 16, "classes": 10, "batch": 2},
}
STEM_MULTIPLIER = 3


# --- operations (parameters, application) ---------------------------------------------------


def relu_conv_bn_params(c_in: int, c_out: int) -> dict:
    return {"conv": L.conv_params(1, 1, c_in, c_out), "bn": L.batch_norm_params(c_out)}


def relu_conv_bn(p, x):
    return L.batch_norm(p["bn"], L.conv(p["conv"], jax.nn.relu(x)))


def factorized_reduce_params(c_in: int, c_out: int) -> dict:
    return {"conv1": L.conv_params(1, 1, c_in, c_out // 2),
            "conv2": L.conv_params(1, 1, c_in, c_out - c_out // 2),
            "bn": L.batch_norm_params(c_out)}


def factorized_reduce(p, x):
    """Halves the resolution: two stride-2 1x1 convolutions, the second on ``x`` shifted by
    one pixel, concatenated."""
    x = jax.nn.relu(x)
    y = jnp.concatenate([L.conv(p["conv1"], x, 2), L.conv(p["conv2"], x[:, 1:, 1:, :], 2)],
                        axis=-1)
    return L.batch_norm(p["bn"], y)


def op_params(name: str, c: int, stride: int):
    if name.startswith("sep_conv"):
        k = int(name[-1])
        return [{"dw": L.conv_params(k, k, c, c, groups=c), "pw": L.conv_params(1, 1, c, c),
                 "bn": L.batch_norm_params(c)} for _ in range(2)]
    if name == "conv_7x1_1x7":
        return {"conv1": L.conv_params(1, 7, c, c), "conv2": L.conv_params(7, 1, c, c),
                "bn": L.batch_norm_params(c)}
    if name == "skip_connect" and stride == 2:
        return factorized_reduce_params(c, c)
    return {}


def apply_op(name: str, p, x, stride: int):
    if name.startswith("sep_conv"):
        for j, q in enumerate(p):
            x = jax.nn.relu(x)
            x = L.conv(q["dw"], x, stride if j == 0 else 1, groups=x.shape[-1])
            x = L.batch_norm(q["bn"], L.conv(q["pw"], x))
        return x
    if name == "conv_7x1_1x7":
        x = L.conv(p["conv1"], jax.nn.relu(x), (1, stride))
        return L.batch_norm(p["bn"], L.conv(p["conv2"], x, (stride, 1)))
    if name == "avg_pool_3x3":
        return L.avg_pool(x, 3, stride)
    if name == "max_pool_3x3":
        return L.max_pool(x, 3, stride)
    if name == "skip_connect":
        return factorized_reduce(p, x) if stride == 2 else x
    raise ValueError(f"unknown operation {name!r}")


# --- cells and the network ------------------------------------------------------------------


def cell_params(c_pp: int, c_p: int, c: int, reduction: bool, reduction_prev: bool) -> dict:
    genotype = REDUCE if reduction else NORMAL
    pre0 = (factorized_reduce_params(c_pp, c) if reduction_prev
            else relu_conv_bn_params(c_pp, c))
    ops = [op_params(name, c, 2 if reduction and index < 2 else 1)
           for name, index in genotype]
    return {"pre0": pre0, "pre1": relu_conv_bn_params(c_p, c), "ops": ops}


def cell(p, s0, s1, reduction: bool, reduction_prev: bool):
    genotype, concat = (REDUCE, REDUCE_CONCAT) if reduction else (NORMAL, NORMAL_CONCAT)
    with jax.named_scope("preprocess"):
        s0 = factorized_reduce(p["pre0"], s0) if reduction_prev else relu_conv_bn(p["pre0"], s0)
        s1 = relu_conv_bn(p["pre1"], s1)
    states = [s0, s1]
    for k in range(len(genotype) // 2):
        with jax.named_scope(f"node_{k}"):
            total = None
            for j in (2 * k, 2 * k + 1):
                name, index = genotype[j]
                stride = 2 if reduction and index < 2 else 1
                y = apply_op(name, p["ops"][j], states[index], stride)
                total = y if total is None else total + y
            states.append(total)
    return jnp.concatenate([states[i] for i in concat], axis=-1)


def cell_kinds(cfg: dict) -> list[bool]:
    """``True`` for a reduction cell, in network order."""
    kinds = [False] * cfg["N"]
    for _ in range(cfg["reductions"]):
        kinds += [True] + [False] * cfg["N"]
    return kinds


def spec(cfg: dict) -> dict:
    c = cfg["channels"]
    c_stem = STEM_MULTIPLIER * c
    c_pp, c_p = c_stem, c_stem
    cells = []
    reduction_prev = False
    for reduction in cell_kinds(cfg):
        if reduction:
            c *= 2
        cells.append(cell_params(c_pp, c_p, c, reduction, reduction_prev))
        c_pp, c_p = c_p, 3 * c  # both genotypes concatenate three states
        reduction_prev = reduction
    return {"stem": L.conv_bn_params(3, 3, 3, c_stem), "cells": cells,
            "classifier": L.dense_params(c_p, cfg["classes"])}


def forward(params: dict, images, kinds: list[bool]):
    with jax.named_scope("stem"):
        s = L.batch_norm(params["stem"]["bn"], L.conv(params["stem"]["conv"], images))
    s0 = s1 = s
    reduction_prev = False
    for i, (p, reduction) in enumerate(zip(params["cells"], kinds)):
        kind = "reduction_cell" if reduction else "normal_cell"
        with jax.named_scope(f"layer_{i}"), jax.named_scope(kind):
            s0, s1 = s1, cell(p, s0, s1, reduction, reduction_prev)
        reduction_prev = reduction
    with jax.named_scope("classifier"):
        return L.dense(params["classifier"], jnp.mean(s1, axis=(1, 2)))


def build(size: str, mode: str):
    cfg = CONFIGS[size]
    kinds = cell_kinds(cfg)
    images = L.normal_data((cfg["batch"], cfg["image"], cfg["image"], 3), salt=1)
    labels = L.tokens((cfg["batch"],), cfg["classes"], salt=2)

    def fwd(params, images):
        return forward(params, images, kinds)

    def loss(params, images, labels):
        return L.cross_entropy(forward(params, images, kinds), labels)

    return L.model_program(f"amoebanet_{size}_{mode}", mode, spec(cfg), (images,), labels,
                           fwd, loss)
