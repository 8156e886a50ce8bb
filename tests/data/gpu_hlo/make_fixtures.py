"""Writes the modules XLA's GPU compiler makes of :data:`PROGRAMS` for an H100, without one
(JAX's CUDA plugin and ``eval/gpu_targets/h100.pbtxt``; see ``eval/compile_train_step.py``):
the fixtures ``tests/test_importers.py`` imports GPU library calls from. From the repository
root::

    JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 JAX_PLATFORMS=cpu PYTHONPATH=.:CUDA_PLUGIN_DIR \\
      XLA_FLAGS="--xla_gpu_autotune_level=0 --xla_gpu_enable_triton_gemm=false" \\
      python tests/data/gpu_hlo/make_fixtures.py

(Triton's matrix products off, so the products are cuBLAS calls.) JAX asks the installed cuDNN
for its version before it lowers cuDNN attention, and without a GPU there may be none: the
script then states 9.10 (XLA builds the cuDNN graphs when the program runs, not here).
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp

from gsched.harness.launches import target_device
from gsched.infra.distributed import shapes_on


def conv(x, w):
    """A 3×3 convolution, stride 1, SAME padding (cuDNN pads it itself), NHWC / HWIO."""
    return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))


def conv_loss(x, w):
    return jnp.sum(jnp.tanh(conv(x, w)))


def products(a, b, c):
    """A batched product, then a plain one: two cuBLAS calls."""
    return jnp.tanh(jnp.einsum("bij,bjk->bik", a, b)) @ c


def attention(q, k, v, implementation="cudnn"):
    """Causal multi-head attention, ``[batch, sequence, heads, head dim]``."""
    return jax.nn.dot_product_attention(q, k, v, is_causal=True,
                                        implementation=implementation)


def attention_loss(q, k, v, implementation="cudnn"):
    return jnp.sum(jnp.square(attention(q, k, v, implementation).astype(jnp.float32)))


def linalg(a, s, b):
    """Dense linear algebra and an FFT: cuSOLVER and cuBLAS calls, and XLA's ``fft``."""
    q, r = jnp.linalg.qr(a)
    u, sv, vt = jnp.linalg.svd(a, full_matrices=False)
    w, vectors = jnp.linalg.eigh(s @ s.T)
    x = jnp.linalg.solve(s, b)
    chol = jnp.linalg.cholesky(s @ s.T + 5 * jnp.eye(s.shape[0]))
    spectrum = jnp.fft.rfft2(s)
    return (q.sum() + r.sum() + u.sum() + sv.sum() + vt.sum() + w.sum() + vectors.sum()
            + x.sum() + chol.sum() + jnp.abs(spectrum).sum())


CONV_ARGS = (jnp.ones((4, 16, 16, 8)), jnp.ones((3, 3, 8, 16)))
PRODUCT_ARGS = (jnp.ones((3, 64, 32)), jnp.ones((3, 32, 48)), jnp.ones((48, 16)))
ATTENTION_ARGS = (jnp.ones((2, 64, 2, 32), jnp.bfloat16),) * 3  # B, S, H, D
LINALG_ARGS = (jnp.ones((3, 6, 4)), jnp.ones((5, 5)), jnp.ones((5, 2)))
PROGRAMS = {  # file name: (function, example arguments)
    "conv_grad.txt": (jax.grad(conv_loss, argnums=(0, 1)), CONV_ARGS),
    "products.txt": (products, PRODUCT_ARGS),
    "attention_grad.txt": (jax.value_and_grad(attention_loss, argnums=(0, 1, 2)),
                           ATTENTION_ARGS),
    "linalg.txt": (linalg, LINALG_ARGS),
}


def main() -> None:
    from jax._src.cudnn import fused_attention_stablehlo as cudnn_attention
    try:
        cudnn_attention.check_cudnn_version()
    except RuntimeError:  # no cuDNN installed here
        cudnn_attention.check_cudnn_version = lambda: 91000
    here = Path(__file__).resolve().parent
    target = target_device(str(here.parents[2] / "eval" / "gpu_targets" / "h100.pbtxt"))
    for file_name, (fn, args) in PROGRAMS.items():
        text = jax.jit(fn).trace(*shapes_on(args, target)).lower().compile().as_text()
        (here / file_name).write_text(text)
        print(file_name, len(text.splitlines()), "lines")


if __name__ == "__main__":
    main()
