"""Import a JAX function as a graph, one op per jaxpr equation (SPEC §1, §8.1).

``import_jax(fn, *args, level="jaxpr")`` traces ``fn`` with ``jax.make_jaxpr`` and maps:

* **dead code**: with ``dce=True`` (the default) the equations no program output depends on
  are dropped first, at the top level and inside bodies (JAX's own dead-code elimination; an
  equation with side effects, such as ``jax.debug.print``, stays), as XLA drops them before it
  schedules anything; ``dce=False`` keeps every equation the trace recorded.

* **program inputs**: each flattened argument leaf (``args`` then ``kwargs``, in
  ``jax.tree_util`` order), then each constant the trace closed over (top-level ``constvars``,
  then the constants of inlined closed jaxprs, in the order met), is one op with
  ``is_input=True``, no flops and one output tensor: the value. They are ops ``0..I-1``, so
  the file order puts them first, as the cost model schedules them (SPEC §1). An input is
  named after its pytree path (``args[0]['w']``, ``kwargs['scale']``, ``const0``).
* **equations**: one op per equation, in program order, after inlining the calls ``jit``
  (``pjit``), ``closed_call``, ``core_call``, ``remat``/``checkpoint``, ``custom_jvp_call``
  and ``custom_vjp_call`` (their bodies' equations take their place; the call's outputs are
  the body's). ``scan``, ``while`` and ``cond`` stay **one op** whose flops cover the body:
  ``scan``: ``length × body``; ``while``: ``cond + body`` times the trip count XLA's loop
  analysis finds for that loop compiled alone (a bound and an initial counter that are
  literals of the program), one trip when it finds none (a bound passed in; a ``fori_loop``
  with static bounds is already a ``scan``); ``cond``: the most expensive branch. A Pallas
  kernel (``pallas_call``) is one op: its ``cost_estimate``'s flops if stated, else its
  body's once per program of its grid. A ``shard_map`` is one op: its body's flops (on one
  shard's values) times the number of shards; ``custom_linear_solve`` (``jnp.linalg.solve``,
  ``cg``) one op counting its ``solve``.
* **tensors**: one per output variable of an equation (a dropped ``_`` output too), size =
  elements × itemsize (extended dtypes such as PRNG keys use their physical layout). Literal
  operands are folded (no tensor, no edge). An equation reading one value twice is one
  consumer (SPEC §1). Program outputs are ordinary tensors: one read by no equation is a
  graph output (SPEC §1), one also read later is freed after its last reader (SPEC §3 has
  no notion of values kept alive to the end).
* **op fields**: ``op`` = primitive name, ``scope`` = the equation's ``source_info.name_stack``
  (``jax.named_scope`` and transformation names such as ``jvp()``), prefixed by the scope of
  the call site for inlined equations; ``name`` = ``"{primitive}.{k}"``; ``op_flops`` from
  :mod:`gsched.importers.flops`; ``compute_cost = flops / peak_flops`` of the device preset
  (microseconds, :mod:`gsched.importers.presets`); no temporary memory.

A primitive the formulas do not know (random-bit generators, for instance) counts what the
HLO level counts of XLA's lowering of that one equation for the CPU, compiled once per
primitive, operand types and parameters. Where that fails or hits opaque code (a custom
call), it gets the generic fallback (one flop per output element) and a
:class:`FallbackWarning` naming it; with ``strict=True`` it is an :class:`ImporterError`
naming the primitive and its equation.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from gsched.core.graph import Graph, make_graph
from gsched.importers import flops as F
from gsched.importers.presets import DevicePreset, preset


class ImporterError(ValueError):
    """A program cannot be imported (untraceable function, unsupported primitive in strict
    mode, malformed HLO text)."""


class FallbackWarning(UserWarning):
    """Some ops' flops come from the generic fallback (one flop per output element)."""


CALLS = {  # call primitive -> the param holding its body
    "pjit": "jaxpr", "jit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
    "call": "call_jaxpr",
    "remat": "jaxpr", "remat2": "jaxpr", "checkpoint": "jaxpr",
    "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr",
    "custom_vjp_call_jaxpr": "fun_jaxpr",
}


def _jax():
    import jax

    return jax


def _body(params: dict, key: str):
    """(jaxpr, consts) of a call's body (a ClosedJaxpr or a bare Jaxpr)."""
    body = params[key]
    if hasattr(body, "jaxpr") and hasattr(body, "consts"):
        return body.jaxpr, list(body.consts)
    return body, []


def _call_body(eqn):
    """(jaxpr, consts) of an inlined call, None for any other equation. Only the call
    primitives of :data:`CALLS` are inlined: another primitive with a body is one op (a Pallas
    kernel counts its body per program, ``shard_map`` once per shard)."""
    key = CALLS.get(eqn.primitive.name)
    if key is None or key not in eqn.params:
        return None
    return _body(eqn.params, key)


def aval_bytes(aval) -> float:
    """Bytes of one abstract value: elements × itemsize (physical layout for extended
    dtypes such as PRNG keys; 0 for tokens and other non-arrays)."""
    shape = getattr(aval, "shape", None)
    dtype = getattr(aval, "dtype", None)
    if shape is None or dtype is None:
        return 0.0
    jax = _jax()
    if jax.dtypes.issubdtype(dtype, jax.dtypes.extended):
        try:
            from jax._src import core

            aval = core.physical_aval(aval)
            shape, dtype = aval.shape, aval.dtype
        except Exception:  # noqa: BLE001 # pragma: no cover - other JAX versions
            return float(F.elements(shape) * getattr(dtype, "itemsize", 0))
    return float(F.elements(shape) * np.dtype(dtype).itemsize)


def _shape(v) -> tuple[int, ...]:
    return tuple(int(d) for d in getattr(v.aval, "shape", ()))


class _Counter:
    """Flops of equations and whole jaxprs; records primitives that used the fallback."""

    def __init__(self, strict: bool):
        self.strict = strict
        self.fallback: dict[str, int] = {}
        self.alone: dict[tuple, int | None] = {}  # what XLA compiled one equation to

    def jaxpr(self, jaxpr) -> int:
        return sum(self.eqn(e) for e in jaxpr.eqns)

    def eqn(self, eqn) -> int:
        name = eqn.primitive.name
        p = eqn.params
        outs = [_shape(v) for v in eqn.outvars]
        out0 = outs[0] if outs else ()
        body = _call_body(eqn) if name not in ("scan", "while", "cond") else None
        if body is not None:
            return self.jaxpr(body[0])
        if name == "scan":
            return int(p["length"]) * self.jaxpr(p["jaxpr"].jaxpr)
        if name == "while":
            trips = self._cached(eqn, "lowered_trip_count")
            trips = 1 if trips is None else trips
            return trips * (self.jaxpr(p["cond_jaxpr"].jaxpr) + self.jaxpr(p["body_jaxpr"].jaxpr))
        if name == "cond":
            return max((self.jaxpr(b.jaxpr) for b in p["branches"]), default=0)
        if name == "dot_general":
            (lhs_contracting, _), _ = p["dimension_numbers"]
            return F.dot_flops(out0, _shape(eqn.invars[0]), lhs_contracting)
        if name == "conv_general_dilated":
            return _conv(eqn)
        if name == "integer_pow":
            return F.integer_pow_flops(out0, p["y"])
        if name in F.ELEMENTWISE:
            return F.elements(out0)
        if name in F.DATA_MOVEMENT:
            return 0
        if name in F.REDUCTIONS:
            operands = max(1, len(eqn.outvars)) if name == "reduce" else 1
            return F.reduce_flops(_shape(eqn.invars[0]), out0, operands)
        if name in F.CUMULATIVE:
            return F.elements(out0)
        if name in F.SCATTER_COMBINE:
            return F.elements(_shape(eqn.invars[2]))
        if name in F.WINDOWED:
            return F.elements(out0) * max(0, F.elements(p["window_dimensions"]) - 1)
        if name in F.WINDOW_GRAD:
            dims = p.get("window_dimensions", ())
            return F.elements(_shape(eqn.invars[0])) * F.elements(dims)
        if name == "sort":
            return F.sort_flops(_shape(eqn.invars[0]), int(p["dimension"]))
        if name in F.COLLECTIVE_REDUCE:
            return sum(F.elements(s) for s in outs)
        if name in F.COLLECTIVE_SCATTER:
            return F.elements(_shape(eqn.invars[0]))
        if name in ("top_k", "approx_top_k"):
            return F.top_k_flops(_shape(eqn.invars[0]), int(p["k"]))
        if name == "fft":
            return F.fft_flops(_shape(eqn.invars[0]), p["fft_lengths"])
        if name in LINALG_PRIMITIVES:
            return _linalg(eqn)
        if name in ATTENTION_PRIMITIVES:
            return _attention(eqn)
        if name == "pallas_call":
            return self._pallas_call(eqn)
        if name == "shard_map":
            return _shards(p) * self.jaxpr(_body(p, "jaxpr")[0])
        if name == "custom_linear_solve":
            return self.jaxpr(p["jaxprs"].solve.jaxpr)
        lowered = self._cached(eqn, "lowered_flops")
        if lowered is not None:
            return lowered
        if self.strict:
            raise ImporterError(f"unsupported primitive {name!r} in equation "
                                f"'{_describe(eqn)}' (strict=True; without it the generic "
                                "fallback counts one flop per output element)")
        self.fallback[name] = self.fallback.get(name, 0) + 1
        return sum(F.elements(s) for s in outs)

    def _cached(self, eqn, reader: str) -> int | None:
        """What :mod:`gsched.importers.hlo`'s ``reader`` reads of XLA's CPU module of this one
        equation — ``lowered_flops`` (its flops, None when it cannot be compiled alone or
        calls opaque code) or ``lowered_trip_count`` (a ``while``'s trip count, None when
        XLA's loop analysis finds none) — once per primitive, operands and parameters."""
        key = (reader, eqn.primitive.name, tuple(_operand_key(v) for v in eqn.invars),
               repr(sorted(eqn.params.items(), key=lambda kv: kv[0])))
        if key not in self.alone:
            from gsched.importers import hlo

            self.alone[key] = getattr(hlo, reader)(eqn)
        return self.alone[key]

    def _pallas_call(self, eqn) -> int:
        """A Pallas kernel: the flops of its ``cost_estimate`` when the call states one, else
        its body's (on blocks of refs) once per program of its grid (one program per index
        of a grid dimension not known at trace time)."""
        estimate = eqn.params.get("cost_estimate")
        if estimate is not None:
            return int(estimate.flops)
        grid = getattr(eqn.params["grid_mapping"], "grid", ())
        programs = math.prod(g if isinstance(g, int) else 1 for g in grid)
        return programs * self.jaxpr(_body(eqn.params, "jaxpr")[0])


def _conv(eqn) -> int:
    p = eqn.params
    lhs, rhs, out = _shape(eqn.invars[0]), _shape(eqn.invars[1]), _shape(eqn.outvars[0])
    dn = p["dimension_numbers"]
    lhs_spec, rhs_spec, out_spec = dn.lhs_spec, dn.rhs_spec, dn.out_spec
    spatial = len(lhs_spec) - 2
    return F.conv_flops(
        lhs_spatial=[lhs[d] for d in lhs_spec[2:]], kernel_spatial=[rhs[d] for d in rhs_spec[2:]],
        out_spatial=[out[d] for d in out_spec[2:]], out_batch=out[out_spec[0]],
        out_features=out[out_spec[1]], kernel_in_features=rhs[rhs_spec[1]],
        strides=p["window_strides"], padding_lo=[lo for lo, _ in p["padding"]],
        lhs_dilation=p.get("lhs_dilation") or (1,) * spatial,
        rhs_dilation=p.get("rhs_dilation") or (1,) * spatial)


# cuDNN's fused attention (``jax.nn.dot_product_attention(..., implementation="cudnn")``):
# inputs (Q, K, V, ...) → (O, ...) forward, (Q, K, V, ..., statistics, O, dO) → (dQ, dK, dV,
# ...) backward, laid out [batch, sequence, heads, head dim] (``layout`` 0) or [batch, heads,
# sequence, head dim] (1). Flash attention, as the HLO level's cuDNN call.
ATTENTION_PRIMITIVES = ("dot_product_attention_fwd_wrapper",
                        "dot_product_attention_bwd_wrapper")


def _attention(eqn) -> int:
    backward = eqn.primitive.name == ATTENTION_PRIMITIVES[1]
    layout = eqn.params.get("layout", 0)
    layout = getattr(layout, "value", layout)  # an int, or an AttentionLayout
    keys = _shape(eqn.invars[1])[1 if layout == 0 else 2]
    output = eqn.invars[-1] if backward else eqn.outvars[0]  # dO, or the result O
    return F.attention_flops(F.elements(_shape(eqn.invars[0])), F.elements(_shape(output)),
                             keys, backward)


# Dense linear algebra (:func:`gsched.importers.flops.linalg_flops`); ``lu_pivots_to_permutation``
# moves data.
LINALG_PRIMITIVES = ("lu", "cholesky", "triangular_solve", "qr", "geqrf", "geqp3",
                     "householder_product", "ormqr", "eigh", "eig", "schur", "hessenberg",
                     "tridiagonal", "tridiagonal_solve", "svd", "symmetric_product")


def _linalg(eqn) -> int:
    name, p = eqn.primitive.name, eqn.params
    a = _shape(eqn.invars[0])
    complex_ = bool(np.issubdtype(eqn.invars[0].aval.dtype, np.complexfloating))
    kind, other, k, vectors = name, (), 0, True
    if name == "triangular_solve":
        other = _shape(eqn.invars[1])
    elif name == "tridiagonal_solve":
        other = _shape(eqn.invars[3])
    elif name in ("qr", "geqrf", "geqp3"):  # ``qr`` forms Q unless it is dropped
        kind = "qr"
        q_kept = name == "qr" and type(eqn.outvars[0]).__name__ != "DropVar"
        vectors = ("full" if p.get("full_matrices") else "thin") if q_kept else False
    elif name == "householder_product":
        k = _shape(eqn.invars[1])[-1]
    elif name == "ormqr":
        k = _shape(eqn.invars[1])[-1]
        other = _shape(eqn.invars[2])
        if not p.get("left", True):  # C·Q: the reflectors act on C's columns
            other = other[:-2] + other[:-3:-1]
    elif name == "eig":
        vectors = bool(p.get("compute_left_eigenvectors") or
                       p.get("compute_right_eigenvectors"))
    elif name == "schur":
        vectors = bool(p.get("compute_schur_vectors", True))
    elif name == "svd":
        vectors = ("full" if p.get("full_matrices", True) else "thin") \
            if p.get("compute_uv", True) else "none"
    return F.linalg_flops(kind, a, other=other, k=k, vectors=vectors, complex_=complex_)


def _shards(params: dict) -> int:
    """How many shards a ``shard_map`` runs its body on: the product of the sizes of the mesh
    axes it makes manual."""
    mesh = params["mesh"]
    sizes = dict(mesh.shape)
    axes = params.get("newly_manual_axes", params.get("manual_axes"))
    if axes is None:
        axes = set(sizes) - set(params.get("auto", ()))
    return math.prod(int(sizes[a]) for a in axes)


def _operand_key(v):
    """An equation operand as a hashable key: its abstract value, or a literal's value."""
    if type(v).__name__ == "Literal":
        return ("literal", repr(v.val), str(v.aval))
    return str(v.aval)


def _describe(eqn) -> str:
    """One line: ``out = primitive in0 in1`` (shapes, no params)."""
    def show(v):
        return str(getattr(v, "aval", v).str_short()) if hasattr(v, "aval") else str(v)
    outs = " ".join(show(v) for v in eqn.outvars)
    ins = " ".join(show(v) for v in eqn.invars)
    where = str(eqn.source_info.name_stack)
    return f"{outs} = {eqn.primitive.name} {ins}" + (f" [scope {where}]" if where else "")


def _join(*parts: str) -> str:
    return "/".join(p for p in parts if p)


def _path_name(path) -> str:
    jax = _jax()
    return jax.tree_util.keystr(path)


class _Builder:
    """Accumulates ops and tensors; inputs and equations are kept apart and numbered with
    the inputs first at the end."""

    def __init__(self, counter: _Counter, device: DevicePreset):
        self.counter = counter
        self.device = device
        self.inputs: list[tuple[str, float]] = []  # (name, size): input i makes tensor i
        self.ops: list[dict] = []  # equations
        self.env: dict[Any, tuple[str, int] | None] = {}
        self.counts: dict[str, int] = {}

    def add_input(self, var, name: str) -> None:
        self.env[var] = ("in", len(self.inputs))
        self.inputs.append((name, aval_bytes(var.aval)))

    def read(self, v) -> tuple[str, int] | None:
        if not hasattr(v, "aval") or type(v).__name__ == "Literal":
            return None
        try:
            return self.env[v]
        except KeyError:
            raise ImporterError(f"jaxpr variable {v} is read before it is defined") from None

    def walk(self, jaxpr, scope: str) -> None:
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            inner_scope = _join(scope, str(eqn.source_info.name_stack))
            body = _call_body(eqn) if name not in ("scan", "while", "cond") else None
            if body is not None:
                self._inline(eqn, body, inner_scope)
                continue
            reads = list(dict.fromkeys(r for r in map(self.read, eqn.invars) if r is not None))
            k = self.counts.get(name, 0)
            self.counts[name] = k + 1
            flops = self.counter.eqn(eqn)
            op = {"name": f"{name}.{k}", "type": name, "scope": inner_scope,
                  "flops": float(flops), "reads": reads,
                  "outputs": [aval_bytes(v.aval) for v in eqn.outvars]}
            j = len(self.ops)
            self.ops.append(op)
            for port, v in enumerate(eqn.outvars):
                if type(v).__name__ != "DropVar":
                    self.env[v] = ("op", j, port)

    def _inline(self, eqn, body, scope: str) -> None:
        inner, consts = body
        for c, v in zip(consts, inner.constvars):
            self.add_input(v, f"const{len(self.inputs)}")
        for outer, v in zip(eqn.invars, inner.invars):
            self.env[v] = self.read(outer)
        self.walk(inner, scope)
        for outer, v in zip(eqn.outvars, inner.outvars):
            if type(outer).__name__ != "DropVar":
                self.env[outer] = self.read(v)

    def graph(self, name: str) -> Graph:
        n_in = len(self.inputs)
        sizes, producer, ports = [], [], []
        first: list[int] = []  # first tensor of each op
        for i, (_, size) in enumerate(self.inputs):
            first.append(len(sizes))
            sizes.append(size), producer.append(i), ports.append(0)
        for j, op in enumerate(self.ops):
            first.append(len(sizes))
            for port, size in enumerate(op["outputs"]):
                sizes.append(size), producer.append(n_in + j), ports.append(port)

        def tensor(ref) -> int:
            return first[ref[1]] if ref[0] == "in" else first[n_in + ref[1]] + ref[2]

        edge_tensor, edge_consumer = [], []
        for j, op in enumerate(self.ops):
            for ref in dict.fromkeys(map(tensor, op["reads"])):
                edge_tensor.append(ref)
                edge_consumer.append(n_in + j)
        op_flops = [0.0] * n_in + [op["flops"] for op in self.ops]
        return make_graph(
            compute_cost=[self.device.compute_cost(f) for f in op_flops],
            temporary_memory=np.zeros(n_in + len(self.ops)),
            tensor_producer=np.asarray(producer, np.int64),
            tensor_size=np.asarray(sizes, np.float64), tensor_port=np.asarray(ports, np.int64),
            edge_tensor=np.asarray(edge_tensor, np.int64),
            edge_consumer=np.asarray(edge_consumer, np.int64),
            op_names=[n for n, _ in self.inputs] + [op["name"] for op in self.ops],
            op_types=["input"] * n_in + [op["type"] for op in self.ops],
            op_scopes=[""] * n_in + [op["scope"] for op in self.ops],
            op_flops=op_flops, name=name,
            is_input=[True] * n_in + [False] * len(self.ops))


def trace(fn: Callable, *args, **kwargs):
    """``jax.make_jaxpr(fn)(*args, **kwargs)``; a failure is an :class:`ImporterError`
    naming the function and the problem."""
    jax = _jax()
    label = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    if not callable(fn):
        raise ImporterError(f"cannot import {label}: not a callable")
    try:
        return jax.make_jaxpr(fn)(*args, **kwargs)
    except Exception as err:  # JAX raises many types; all mean "not traceable with these args"
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise ImporterError(f"cannot trace {label} with jax.make_jaxpr: "
                            f"{type(err).__name__}: {first}") from err


def live_jaxpr(jaxpr):
    """``jaxpr`` without the equations none of its outputs depends on, recursively (JAX's
    dead-code elimination: effectful equations and every input are kept)."""
    from jax._src.interpreters import partial_eval as pe

    live, _ = pe.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars), instantiate=True)
    return live


def jaxpr_to_graph(closed, arg_names: list[str] | None = None, *, device="v100",
                   name: str = "", strict: bool = False, dce: bool = True) -> Graph:
    """A ``ClosedJaxpr`` as a graph (see the module docstring). ``arg_names`` names the
    program inputs of ``closed.jaxpr.invars`` (default ``arg{i}``); ``dce``: drop dead
    equations first."""
    counter = _Counter(strict)
    builder = _Builder(counter, preset(device))
    jaxpr = live_jaxpr(closed.jaxpr) if dce else closed.jaxpr
    names = arg_names or [f"arg{i}" for i in range(len(jaxpr.invars))]
    for v, n in zip(jaxpr.invars, names):
        builder.add_input(v, n)
    for v in jaxpr.constvars:
        builder.add_input(v, f"const{len(builder.inputs) - len(jaxpr.invars)}")
    builder.walk(jaxpr, "")
    if counter.fallback:
        listed = ", ".join(f"{k} ×{c}" for k, c in sorted(counter.fallback.items()))
        warnings.warn(f"flops of unknown primitives estimated as one per output element: "
                      f"{listed}", FallbackWarning, stacklevel=3)
    return builder.graph(name)


def import_jaxpr(fn: Callable, *args, device="v100", name: str | None = None,
                 strict: bool = False, dce: bool = True, **kwargs) -> Graph:
    """``fn(*args, **kwargs)``'s jaxpr as a graph (see the module docstring)."""
    jax = _jax()
    closed = trace(fn, *args, **kwargs)
    leaves = jax.tree_util.tree_flatten_with_path((args, kwargs))[0]
    names = []
    for path, _ in leaves:
        head, rest = path[0], path[1:]
        prefix = "args" if getattr(head, "idx", None) == 0 else "kwargs"
        names.append(prefix + _path_name(rest))
    if len(names) != len(closed.jaxpr.invars):  # pragma: no cover - defensive
        names = None
    label = name if name is not None else getattr(fn, "__name__", "") or ""
    return jaxpr_to_graph(closed, names, device=device, name=label, strict=strict, dce=dce)


def total_flops(graph: Graph) -> float:
    """Σ op flops of an imported graph."""
    return float(graph.op_flops.sum())
