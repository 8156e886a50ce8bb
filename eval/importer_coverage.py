"""Programs beyond the workloads' layers — dense linear algebra, spectral layers, dropout,
mixture-of-experts routing, a Gaussian process — imported at both levels, their total flops
against XLA's own count of the CPU module (docs/importers.md, "Linear algebra, FFTs, random
bits"). XLA counts a LAPACK call as nothing, so its column is the floor of what the program
does, not a reference. Per program: flops at the jaxpr level, at the HLO level, XLA's
``flops + transcendentals``, and the primitives / calls left to the generic fallback::

    python -m eval.importer_coverage
"""

from __future__ import annotations

import argparse
import functools
import warnings
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp

from gsched.importers import FallbackWarning, cost_analysis, import_jax


def solve(a, b):
    return jnp.linalg.solve(a, b)


def gaussian_process(x, y, scale):
    """The log marginal likelihood of an RBF-kernel Gaussian process and its gradient."""
    def nll(s):
        k = jnp.exp(-jnp.sum((x[:, None] - x[None]) ** 2, -1) / s) + 1e-3 * jnp.eye(len(x))
        chol = jnp.linalg.cholesky(k)
        alpha = jax.scipy.linalg.cho_solve((chol, True), y)
        return 0.5 * y @ alpha + jnp.sum(jnp.log(jnp.diag(chol)))
    return jax.value_and_grad(nll)(scale)


def spectral_layer(x, w):
    """A Fourier neural operator's layer: the 16 × 16 lowest modes mixed per channel pair."""
    modes = jnp.fft.rfft2(x, axes=(1, 2))[:, :16, :16, :]
    mixed = jnp.einsum("bxyi,xyio->bxyo", modes, w)
    return jnp.fft.irfft2(mixed, s=x.shape[1:3], axes=(1, 2))


def dropout_mlp_step(params, key, x):
    """A training step's loss and gradients, dropout after each hidden layer."""
    def loss(p):
        h, k = x, key
        for w in p:
            k, sub = jax.random.split(k)
            h = jnp.tanh(h @ w)
            h = jnp.where(jax.random.bernoulli(sub, 0.9, h.shape), h / 0.9, 0.0)
        return jnp.mean(h ** 2)
    return jax.value_and_grad(loss)(params)


def top2_routing(x, gate):
    """A mixture of experts' router: each token's two best experts and their weights."""
    weights, experts = jax.lax.top_k(x @ gate, 2)
    return jax.nn.softmax(weights, -1), experts


def programs() -> dict[str, tuple[Callable, tuple]]:
    """name: (function, example arguments)."""
    return {
        "solve 256 × 256, 8 right-hand sides": (solve, (jnp.eye(256) * 2 + 0.01,
                                                        jnp.ones((256, 8)))),
        "eigh 256 × 256": (jnp.linalg.eigh, (jnp.eye(256),)),
        "svd 512 × 256 (thin)": (functools.partial(jnp.linalg.svd, full_matrices=False),
                                 (jnp.ones((512, 256)),)),
        "qr 512 × 256": (jnp.linalg.qr, (jnp.ones((512, 256)),)),
        "Gaussian process, 256 points, value and grad": (
            gaussian_process, (jnp.ones((256, 3)), jnp.ones(256), jnp.asarray(1.0))),
        "FNO spectral layer, 8 × 64 × 64 × 32": (
            spectral_layer, (jnp.ones((8, 64, 64, 32)),
                             jnp.ones((16, 16, 32, 32), jnp.complex64))),
        "MLP step with dropout, 3 × 512, batch 256": (
            dropout_mlp_step, ([jnp.ones((512, 512))] * 3, jax.random.key(0),
                               jnp.ones((256, 512)))),
        "top-2 routing, 4,096 tokens, 64 experts": (
            top2_routing, (jnp.ones((4096, 256)), jnp.ones((256, 64)))),
    }


def imported(fn: Callable, args: Sequence, level: str) -> tuple[float, list[str]]:
    """Total flops at ``level`` and the fallback warnings' lists."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FallbackWarning)
        graph = import_jax(fn, *args, level=level)
    return float(graph.op_flops.sum()), [str(w.message).partition(": ")[2] for w in caught
                                         if issubclass(w.category, FallbackWarning)]


def row(name: str, fn: Callable, args: Sequence) -> str:
    jaxpr, fallback = imported(fn, args, "jaxpr")
    hlo, hlo_fallback = imported(fn, args, "hlo")
    ca = cost_analysis(fn, *args)
    xla = max(0.0, ca.get("flops", 0.0)) + max(0.0, ca.get("transcendentals", 0.0))
    left = "; ".join(fallback + hlo_fallback) or "—"
    return (f"| {name} | {jaxpr / 1e6:,.2f} | {hlo / 1e6:,.2f} | {xla / 1e6:,.2f} | "
            f"{jaxpr / hlo:.2f} | {left} |")


def main(argv: Sequence[str] | None = None) -> None:
    argparse.ArgumentParser(prog="python -m eval.importer_coverage",
                            description=__doc__.split("\n\n")[0]).parse_args(argv)
    print("| program | jaxpr level, Mflop | HLO level (CPU), Mflop | XLA's cost analysis, "
          "Mflop | jaxpr ÷ HLO | generic fallback |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, (fn, args) in programs().items():
        print(row(name, fn, args), flush=True)


if __name__ == "__main__":
    main()
