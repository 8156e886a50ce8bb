"""Building blocks shared by the workloads: deterministic parameters, the layers (dense, LSTM
cell, convolution, batch/layer norm, pooling, attention) as plain ``jax.numpy`` functions over
explicit parameter pytrees, and the wrappers that turn a model into an ``"inference"`` or a
``"train"`` program.

Python-level loops only (no ``lax.scan``), so an imported program has one op per layer, head
and time step; tensors are tiny on purpose (the graphs' structure is the point, not FLOPs).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

SEED = 0


# --- parameters -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """A parameter still to be drawn: its shape and initializer (``normal`` with standard
    deviation ``scale``, ``zeros`` or ``ones``)."""

    shape: tuple[int, ...]
    init: str = "normal"
    scale: float = 1.0


def weight(*shape: int, fan_in: int | None = None) -> Spec:
    """A weight with LeCun-normal scale (``1/sqrt(fan_in)``, fan-in = all but the last dim)."""
    fan = fan_in if fan_in is not None else int(np.prod(shape[:-1])) or 1
    return Spec(tuple(shape), "normal", 1.0 / math.sqrt(fan))


def zeros(*shape: int) -> Spec:
    return Spec(tuple(shape), "zeros")


def ones(*shape: int) -> Spec:
    return Spec(tuple(shape), "ones")


def _is_spec(x) -> bool:
    return isinstance(x, Spec)


def materialize(tree, seed: int = SEED):
    """``tree`` with every :class:`Spec` leaf drawn, deterministically: one
    ``jax.random.normal(jax.random.PRNGKey(seed), (total,))`` draw cut into the normal leaves
    in ``jax.tree_util`` order (one draw, not one per leaf: the large models have thousands
    of parameters). Returns float32 ``jax.Array`` leaves."""
    leaves, treedef = jax.tree_util.tree_flatten(tree, is_leaf=_is_spec)
    total = sum(int(np.prod(s.shape)) for s in leaves if _is_spec(s) and s.init == "normal")
    noise = np.asarray(jax.random.normal(jax.random.PRNGKey(seed), (max(total, 1),),
                                         jnp.float32))
    out, pos = [], 0
    for s in leaves:
        if not _is_spec(s):
            out.append(s)
            continue
        size = int(np.prod(s.shape))
        if s.init == "normal":
            value = noise[pos:pos + size].reshape(s.shape) * np.float32(s.scale)
            pos += size
        elif s.init == "zeros":
            value = np.zeros(s.shape, np.float32)
        else:
            value = np.ones(s.shape, np.float32)
        out.append(value.astype(np.float32))
    return jax.device_put(jax.tree_util.tree_unflatten(treedef, out))


def tokens(shape: tuple[int, ...], vocab: int, salt: int) -> jax.Array:
    """Deterministic int32 token ids in ``[0, vocab)`` (PRNGKey(0) folded with ``salt``)."""
    key = jax.random.fold_in(jax.random.PRNGKey(SEED), salt)
    return jax.random.randint(key, shape, 0, vocab, jnp.int32)


def normal_data(shape: tuple[int, ...], salt: int) -> jax.Array:
    """Deterministic float32 standard-normal data (PRNGKey(0) folded with ``salt``)."""
    key = jax.random.fold_in(jax.random.PRNGKey(SEED), salt)
    return jax.random.normal(key, shape, jnp.float32)


# --- layers ---------------------------------------------------------------------------------


def dense_params(d_in: int, d_out: int, bias: bool = True) -> dict:
    p = {"w": weight(d_in, d_out)}
    if bias:
        p["b"] = zeros(d_out)
    return p


def dense(p: dict, x):
    y = x @ p["w"]
    return y + p["b"] if "b" in p else y


def embed(table, ids):
    return jnp.take(table, ids, axis=0)


def lstm_params(d_in: int, hidden: int) -> dict:
    return {"wx": weight(d_in, 4 * hidden), "wh": weight(hidden, 4 * hidden),
            "b": zeros(4 * hidden)}


def lstm_cell(p: dict, x, state):
    """One LSTM step (Hochreiter & Schmidhuber 1997; gates i, f, g, o)."""
    h, c = state
    z = x @ p["wx"] + h @ p["wh"] + p["b"]
    i, f, g, o = jnp.split(z, 4, axis=-1)
    c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    h = jax.nn.sigmoid(o) * jnp.tanh(c)
    return h, c


def layer_norm_params(d: int) -> dict:
    return {"scale": ones(d), "bias": zeros(d)}


def layer_norm(p: dict, x, eps: float = 1e-5):
    centered = x - jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(centered), axis=-1, keepdims=True)
    return centered * jax.lax.rsqrt(var + eps) * p["scale"] + p["bias"]


def batch_norm_params(c: int) -> dict:
    return {"scale": ones(c), "bias": zeros(c)}


def batch_norm(p: dict, x, eps: float = 1e-3):
    """Batch normalization with the batch's statistics (over N, H, W of NHWC; N, T of NTC) —
    the same computation in both modes, so the models carry no running-statistics state."""
    axes = tuple(range(x.ndim - 1))
    centered = x - jnp.mean(x, axis=axes)
    var = jnp.mean(jnp.square(centered), axis=axes)
    return centered * (jax.lax.rsqrt(var + eps) * p["scale"]) + p["bias"]


def conv_params(kh: int, kw: int, c_in: int, c_out: int, groups: int = 1) -> dict:
    return {"w": weight(kh, kw, c_in // groups, c_out)}


def conv(p: dict, x, stride=1, dilation=1, groups: int = 1, padding="SAME"):
    """2-D convolution, NHWC activations and HWIO kernels."""
    stride = (stride, stride) if isinstance(stride, int) else tuple(stride)
    dilation = (dilation, dilation) if isinstance(dilation, int) else tuple(dilation)
    return jax.lax.conv_general_dilated(
        x, p["w"], window_strides=stride, padding=padding, rhs_dilation=dilation,
        dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=groups)


def conv_bn_params(kh: int, kw: int, c_in: int, c_out: int) -> dict:
    return {"conv": conv_params(kh, kw, c_in, c_out), "bn": batch_norm_params(c_out)}


def conv_bn_relu(p: dict, x, stride=1):
    """Convolution → batch norm → ReLU (Inception-v3's ``BasicConv2d``)."""
    return jax.nn.relu(batch_norm(p["bn"], conv(p["conv"], x, stride)))


def max_pool(x, size: int = 3, stride: int = 1, padding="SAME"):
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, size, size, 1),
                                 (1, stride, stride, 1), padding)


def avg_pool(x, size: int = 3, stride: int = 1, padding="SAME"):
    """Average pooling that counts only real (unpadded) elements, as TF's ``avg_pool``."""
    window, strides = (1, size, size, 1), (1, stride, stride, 1)
    total = jax.lax.reduce_window(x, 0.0, jax.lax.add, window, strides, padding)
    count = jax.lax.reduce_window(jnp.ones(x.shape[1:3], x.dtype)[None, :, :, None], 0.0,
                                  jax.lax.add, window, strides, padding)
    return total / count


def softmax(x, axis: int = -1):
    x = x - jax.lax.stop_gradient(jnp.max(x, axis=axis, keepdims=True))
    e = jnp.exp(x)
    return e / jnp.sum(e, axis=axis, keepdims=True)


def cross_entropy(logits, labels):
    """Mean softmax cross-entropy of integer ``labels``."""
    logp = jax.nn.log_softmax(logits, axis=-1)
    picked = jnp.take_along_axis(logp, labels[..., None], axis=-1)
    return -jnp.mean(picked)


def attention_head_params(d_model: int, d_head: int) -> dict:
    return {"q": weight(d_model, d_head), "k": weight(d_model, d_head),
            "v": weight(d_model, d_head)}


def causal_mask(q_len: int, k_len: int) -> np.ndarray:
    """True where query ``i`` may see key ``j``: the keys end with the queries (a memory of
    ``k_len - q_len`` earlier positions is visible to all)."""
    offset = k_len - q_len
    return np.arange(k_len)[None, :] <= np.arange(q_len)[:, None] + offset


# --- programs -------------------------------------------------------------------------------


def inference_program(name: str, forward: Callable, params, batch: tuple):
    """``(fn, args)``: ``fn(params, *batch)`` = the model's forward outputs."""

    def fn(params, *batch):
        return forward(params, *batch)

    fn.__name__ = fn.__qualname__ = name
    return fn, (params, *batch)


def train_program(name: str, loss: Callable, params, batch: tuple, learning_rate: float = 1e-3):
    """``(fn, args)``: one training step ``fn(params, opt_state, *batch)`` →
    ``(loss, new_params, new_opt_state)``: ``jax.value_and_grad(loss)`` and an
    ``optax.adam`` update."""
    import optax

    optimizer = optax.adam(learning_rate)

    def fn(params, opt_state, *batch):
        value, grads = jax.value_and_grad(loss)(params, *batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return value, optax.apply_updates(params, updates), opt_state

    fn.__name__ = fn.__qualname__ = name
    return fn, (params, optimizer.init(params), *batch)


def model_program(label: str, mode: str, spec, inputs: tuple, targets, forward: Callable,
                  loss: Callable):
    """The ``mode`` program of a model: parameters drawn from ``spec``; ``forward(params,
    *inputs)`` for ``"inference"``; ``loss(params, *inputs, targets)`` trained with Adam for
    ``"train"``."""
    params = materialize(spec)
    if mode == "inference":
        return inference_program(label, forward, params, tuple(inputs))
    return train_program(label, loss, params, (*inputs, targets))
