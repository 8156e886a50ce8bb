"""The papers' workloads as JAX programs (issue #12 §2; docs/workloads.md).

The model families of GDP and GO (RNNLM, GNMT, Transformer-XL, Inception-v3, AmoebaNet,
WaveNet) plus a ResNet and a GPT-style decoder, in plain ``jax.numpy`` over explicit parameter
pytrees, each as an ``"inference"`` program (the forward pass) and a ``"train"`` program (one
step: ``jax.value_and_grad`` of the loss and an ``optax.adam`` update, returning
``(loss, new_params, new_opt_state)``), at three sizes. Loops over layers, heads and time steps
are unrolled in Python, so the imported graphs have one op per layer and step (``small``: a
few hundred ops at the jaxpr level, ``large``: more than 10,000); every layer is under
``jax.named_scope(f"layer_{i}")``. Tensors are tiny: the graphs' structure is the point.

    fn, args = program("rnnlm", "medium", "train")
    graph = gsched.importers.import_jax(fn, *args, level="jaxpr")

Parameters and data are deterministic (``jax.random.PRNGKey(0)``). :func:`build_graphs` (and
``python -m gsched.workloads build``) imports every program into graph files.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable

SIZES = ("small", "medium", "large")
MODES = ("inference", "train")


@dataclasses.dataclass(frozen=True)
class Workload:
    """One model family: ``build(size, mode) -> (fn, args)``, ``fn(*args)`` jittable."""

    name: str
    family: str
    build: Callable[[str, str], tuple[Callable, tuple]]


def _lazy(module: str) -> Callable[[str, str], tuple[Callable, tuple]]:
    """The ``build`` of ``gsched.workloads.<module>``, imported on first use."""

    def build(size: str, mode: str):
        _check(size, mode)
        return importlib.import_module(f"gsched.workloads.{module}").build(size, mode)

    build.__name__ = build.__qualname__ = f"build_{module}"
    return build


WORKLOADS: dict[str, Workload] = {
    name: Workload(name, family, _lazy(name)) for name, family in [
        ("rnnlm", "RNNLM (GDP, GO)"),
        ("gnmt", "GNMT (GDP, GO)"),
        ("transformer_xl", "Transformer-XL (GDP, GO)"),
        ("inception", "Inception-v3 (GDP, GO)"),
        ("amoebanet", "AmoebaNet (GDP, GO)"),
        ("wavenet", "WaveNet (GDP, GO)"),
        ("resnet", "ResNet (added)"),
        ("gpt", "GPT decoder (added)"),
    ]}


def _choice(kind: str, value, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"unknown workload {kind} {value!r}; expected one of "
                         f"{', '.join(allowed)}")


def _check(size: str, mode: str) -> None:
    _choice("size", size, SIZES)
    _choice("mode", mode, MODES)


def program(name: str, size: str = "small", mode: str = "inference") -> tuple[Callable, tuple]:
    """``(fn, args)`` of workload ``name`` at ``size`` in ``mode``: ``fn(*args)`` is
    jittable. Raises ``ValueError`` naming the allowed values for a bad name, size or mode."""
    _choice("name", name, tuple(WORKLOADS))
    _check(size, mode)
    return WORKLOADS[name].build(size, mode)


def build_graphs(out, names=None, sizes=("small",), modes=MODES, levels=("jaxpr",),
                 device: str = "v100", log=None) -> dict:
    """Imports every program into ``out`` (see :func:`gsched.workloads.build.build_graphs`)."""
    from gsched.workloads.build import build_graphs as run

    return run(out, names=names, sizes=sizes, modes=modes, levels=levels, device=device,
               log=log)


__all__ = ["MODES", "SIZES", "WORKLOADS", "Workload", "build_graphs", "program"]
