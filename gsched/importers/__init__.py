"""Importers: real programs in as graphs (stage 1, graph I/O; docs/importers.md).

* :func:`import_jax` — a JAX function and example arguments, at the jaxpr level (one op per
  equation, program order) or the compiled-HLO level (one op per ENTRY instruction, XLA's
  schedule);
* :func:`import_hlo_text` — the text of a compiled XLA module;
* :data:`PRESETS` — device presets (peak flops, HBM bandwidth, launch overhead; costs in
  microseconds).

Every imported graph has program inputs first (SPEC §1), per-op ``op_scopes`` and
``op_flops``, and ``compute_cost = op_flops / peak_flops``.
"""

from __future__ import annotations

from collections.abc import Callable

from gsched.core.graph import Graph
from gsched.importers.hlo import (
    BACKEND,
    compile_for,
    compiled_text,
    cost_analysis,
    import_hlo_text,
)
from gsched.importers.jaxpr import FallbackWarning, ImporterError, import_jaxpr
from gsched.importers.presets import PRESETS, TIME_UNIT, DevicePreset, preset

LEVELS = ("jaxpr", "hlo")

__all__ = ["BACKEND", "LEVELS", "PRESETS", "TIME_UNIT", "DevicePreset", "FallbackWarning",
           "ImporterError", "compile_for", "compiled_text", "cost_analysis", "import_hlo_text",
           "import_jax", "preset"]


def import_jax(fn: Callable, *example_args, level: str = "jaxpr", device="v100",
               name: str | None = None, strict: bool = False, dce: bool = True,
               backend=BACKEND, **kwargs) -> Graph:
    """``fn(*example_args, **kwargs)`` as a graph.

    ``level="jaxpr"``: one op per jaxpr equation in program order (calls inlined; ``scan``,
    ``while``, ``cond`` one op each); ``level="hlo"``: one op per ENTRY instruction of
    ``jax.jit(fn).lower(...).compile().as_text()`` in XLA's schedule order, compiled for
    ``backend`` (default ``"cpu"``: the same graph on every machine; ``"gpu"``, ``"tpu"``,
    ``None`` for JAX's default backend, or a ``jax.Device``: that platform's module and
    schedule; :func:`compile_for`). ``device``: a
    preset name (``v100``, ``a100``, ``h100``, ``tpu_v4``) or a :class:`DevicePreset`.
    ``strict``: an unknown primitive/opcode is an error instead of the generic fallback.
    ``dce=False`` (jaxpr level only) keeps the equations no output depends on, which the
    default drops as XLA does (the HLO level has none to keep).
    ``name``: the graph's name (default ``fn.__name__``). Keyword arguments are passed to
    ``fn`` (traced, like the positional ones). Raises :class:`ImporterError` for a function
    that cannot be traced or compiled with these arguments, ``ValueError`` for a bad level
    or device.
    """
    if level not in LEVELS:
        raise ValueError(f"unknown import level {level!r} (jaxpr or hlo)")
    if level == "hlo" and not dce:
        raise ValueError("dce=False applies to the jaxpr level: XLA's compiled module has "
                         "already dropped dead code")
    preset(device)  # a bad device fails before tracing
    label = name if name is not None else getattr(fn, "__name__", "") or ""
    if level == "jaxpr":
        return import_jaxpr(fn, *example_args, device=device, name=label, strict=strict,
                            dce=dce, **kwargs)
    return import_hlo_text(compiled_text(fn, *example_args, backend=backend, **kwargs),
                           device=device, name=label, strict=strict)
