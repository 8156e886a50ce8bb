"""Importers: the routines with their own counts — dense linear algebra (LAPACK on the CPU,
cuSOLVER / cuBLAS on a GPU), FFTs, top-k, random bits (XLA's lowering of one equation) and
``shard_map`` (its body on every shard) — at the jaxpr and HLO levels, with ``strict=True``
wherever a count must not come from the generic fallback.

The linear-algebra formulas are checked against the textbook counts they implement, and the
two levels against each other: they read what a routine computes from different places (the
primitive's parameters, the library call's ``backend_config``)."""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import AbstractMesh, AxisType
from jax.sharding import PartitionSpec as P

from gsched.importers import (
    FallbackWarning,
    ImporterError,
    cost_analysis,
    import_hlo_text,
    import_jax,
)
from gsched.importers import flops as F
from gsched.importers import hlo as hlo_module
from gsched.importers.jaxpr import LINALG_PRIMITIVES
from tests.graphs import GPU_HLO

SQUARE = jnp.eye(5) + jnp.ones((5, 5))  # well conditioned, symmetric
TALL = jnp.ones((3, 6, 4))


# --------------------------------------------------------------------------- formulas


def test_linear_algebra_formulas_are_the_textbook_counts():
    lin = F.linalg_flops
    assert lin("lu", (6, 6)) == 2 * 6 ** 3 / 3  # getrf, square
    assert lin("lu", (8, 4)) == lin("lu", (4, 8)) == round(8 * 16 - 64 / 3)  # mn² − n³/3
    assert lin("cholesky", (6, 6)) == 6 ** 3 / 3
    assert lin("triangular_solve", (5, 5), other=(5, 3)) == 5 * 5 * 3  # m²n, from the left
    assert lin("triangular_solve", (3, 3), other=(5, 3)) == 5 * 3 * 3  # mn², from the right
    assert lin("qr", (8, 4), vectors=False) == lin("qr", (4, 8), vectors=False) == \
        round(2 * 8 * 16 - 2 * 64 / 3)  # geqrf: 2mn² − 2n³/3
    assert lin("householder_product", (6, 6), k=6) == 4 * 6 ** 3 / 3  # orgqr, square
    assert lin("qr", (8, 4), vectors="thin") == round(2 * 8 * 16 - 2 * 64 / 3) + round(
        4 * 8 * 4 * 4 - 2 * 12 * 16 + 4 * 64 / 3)  # geqrf + orgqr forming Q₁ (8 × 4)
    assert lin("eigh", (6, 6)) == 9 * 6 ** 3 and lin("eigh", (6, 6), vectors=False) == 288
    assert lin("svd", (8, 4), vectors="none") == round(4 * 8 * 16 - 4 * 64 / 3)
    assert lin("svd", (8, 4), vectors="thin") == lin("svd", (4, 8), vectors="thin") == \
        14 * 8 * 16 + 8 * 64
    assert lin("svd", (8, 4), vectors="full") == 4 * 64 * 4 + 8 * 8 * 16 + 9 * 64
    assert lin("eig", (4, 4)) == 25 * 64 and lin("schur", (4, 4), vectors=False) == 10 * 64
    assert lin("cholesky", (3, 6, 6)) == 3 * 72  # a batch of three
    assert lin("cholesky", (6, 6), complex_=True) == 4 * 72
    assert lin("tridiagonal_solve", (5,), other=(5, 2)) == (3 + 5 * 2) * 5
    with pytest.raises(ValueError, match="unknown linear-algebra kind 'lq'"):
        lin("lq", (4, 4))


# --------------------------------------------------------------------------- linear algebra


def linalg_ops(graph) -> float:
    """Σ flops of the graph's dense linear-algebra ops: primitives at the jaxpr level,
    library calls (the only custom calls of these programs) at the HLO level."""
    kinds = set(LINALG_PRIMITIVES) | {"custom-call"}
    return sum(f for t, f in zip(graph.op_types, graph.op_flops) if t in kinds)


ROUTINES = {  # name: (function, argument)
    "lu": (jax.scipy.linalg.lu, SQUARE),
    "cholesky (complex)": (jnp.linalg.cholesky, SQUARE.astype(jnp.complex64)),
    "solve_triangular left": (lambda a: jax.scipy.linalg.solve_triangular(
        a, jnp.ones((5, 3)), lower=True), SQUARE),
    "triangular_solve right": (lambda a: jax.lax.linalg.triangular_solve(
        a, jnp.ones((3, 5)), left_side=False, lower=True, transpose_a=True), SQUARE),
    "qr reduced": (jnp.linalg.qr, TALL),
    "qr complete": (functools.partial(jnp.linalg.qr, mode="complete"), TALL),
    "qr wide": (jnp.linalg.qr, jnp.ones((2, 4, 7))),
    "eigh": (jnp.linalg.eigh, SQUARE),
    "eigvalsh": (jnp.linalg.eigvalsh, SQUARE),  # LAPACK computes the vectors anyway
    "svd full": (jnp.linalg.svd, TALL),
    "svd thin": (functools.partial(jnp.linalg.svd, full_matrices=False), TALL),
    "svd values": (functools.partial(jnp.linalg.svd, compute_uv=False), TALL),
    "eig": (jnp.linalg.eig, SQUARE),
    "eigvals": (jnp.linalg.eigvals, SQUARE),
    "schur": (jax.scipy.linalg.schur, SQUARE),
    "hessenberg": (jax.scipy.linalg.hessenberg, SQUARE),
    "tridiagonal": (jax.lax.linalg.tridiagonal, SQUARE),
    "tridiagonal_solve": (lambda a: jax.lax.linalg.tridiagonal_solve(
        a[0], a[1], a[2], a[:, :2]), SQUARE),
}


@pytest.mark.parametrize("name", ROUTINES)
def test_linear_algebra_counts_agree_between_the_jaxpr_and_cpu_hlo_levels(name):
    fn, x = ROUTINES[name]
    jaxpr = linalg_ops(import_jax(fn, x, strict=True))
    hlo = linalg_ops(import_jax(fn, x, level="hlo", strict=True))  # LAPACK calls
    assert jaxpr == hlo > 0


def test_a_linear_solve_counts_its_solve_and_iterative_solvers_import_strictly():
    n = 16
    a, b = jnp.eye(n) * 3 + jnp.ones((n, n)), jnp.ones(n)
    g = import_jax(jnp.linalg.solve, a, b, strict=True)
    assert g.op_types.count("lu") == 1
    solve = g.op_flops[g.op_types.index("custom_linear_solve")]
    assert solve >= 2 * n * n  # two triangular solves of one right-hand side, and their glue
    cg = import_jax(lambda m, v: jax.scipy.sparse.linalg.cg(lambda y: m @ y, v)[0], a, b,
                    strict=True)
    assert cg.op_flops[cg.op_types.index("custom_linear_solve")] >= 2 * n * n  # one matvec


def routine_flops(text: str) -> dict[str, float]:
    """Σ flops per dense linear-algebra routine (``getrf``, ``syevd``, ...) of a module's
    library calls, counted by the HLO importer (strict)."""
    graph = import_hlo_text(text, strict=True)
    module = hlo_module.parse_module(text)
    by_name = {i.name: i for i in module.computations[module.entry]}
    out: dict[str, float] = {}
    for name, flops in zip(graph.op_names, graph.op_flops):
        call = hlo_module.SOLVER_CALL.fullmatch(hlo_module.custom_call_target(by_name[name]))
        if call:
            out[call.group(1)] = out.get(call.group(1), 0) + flops
    return out


def test_gpu_solver_calls_count_as_their_cpu_lapack_twins(gpu_programs):
    gpu = routine_flops((GPU_HLO / "linalg.txt").read_text())
    cpu = routine_flops(hlo_module.compiled_text(gpu_programs.linalg,
                                                 *gpu_programs.LINALG_ARGS))
    lin = F.linalg_flops
    # what the program computes, by the formulas (a: 3 × 6 × 4, s: 5 × 5, b: 5 × 2)
    assert gpu == {"geqrf": lin("qr", (3, 6, 4), vectors=False),
                   "orgqr": lin("householder_product", (3, 6, 4), k=4),
                   "gesvdj": lin("svd", (3, 6, 4), vectors="full"),  # cuSOLVER: full U, V
                   "syevd": lin("eigh", (5, 5)), "getrf": lin("lu", (5, 5)),
                   "triangularSolve": 2 * lin("triangular_solve", (5, 5), other=(5, 2)),
                   "potrf": lin("cholesky", (5, 5))}
    assert cpu == {**{k: v for k, v in gpu.items() if k not in ("gesvdj", "triangularSolve")},
                   "gesdd": lin("svd", (3, 6, 4), vectors="thin"),  # LAPACK: thin, as asked
                   "trsm": gpu["triangularSolve"]}
    # the same routines at the jaxpr level: SVD as asked, L and U solved inside the solve
    g = import_jax(gpu_programs.linalg, *gpu_programs.LINALG_ARGS, strict=True)
    by_type = dict(zip(g.op_types, g.op_flops))
    assert by_type["svd"] == cpu["gesdd"] and by_type["eigh"] == cpu["syevd"]
    assert by_type["qr"] == cpu["geqrf"] + cpu["orgqr"] and by_type["lu"] == cpu["getrf"]


def test_xla_linear_algebra_of_a_tpu_module_before_optimization_counts_the_formulas():
    def program(a, b):
        chol = jnp.linalg.cholesky(a)
        x = jax.scipy.linalg.solve_triangular(chol, b, lower=True)
        w, v = jnp.linalg.eigh(a)
        q, r = jnp.linalg.qr(a)
        return x.sum() + w.sum() + v.sum() + q.sum() + r.sum() + jax.scipy.linalg.lu(a)[2].sum()

    a, b = jnp.eye(8) + 1, jnp.ones((8, 3))
    text = jax.jit(program).trace(a, b).lower(lowering_platforms=("tpu",)).as_text(
        dialect="hlo")  # XLA's opcodes and calls, which its TPU compiler expands
    assert import_hlo_text(text, strict=True).op_flops.sum() > 0
    module = hlo_module.parse_module(text)
    counter = hlo_module._Flops(module, strict=True)
    counts = {}
    for ins in (i for c in module.computations.values() for i in c):
        kind = hlo_module.XLA_LINALG.get(hlo_module.custom_call_target(ins) or ins.opcode)
        if kind:
            counts.setdefault(kind, set()).add(counter.instr(ins))
    lin = F.linalg_flops
    assert counts == {"cholesky": {lin("cholesky", (8, 8))},
                      "triangular_solve": {lin("triangular_solve", (8, 8), other=(8, 3))},
                      "eigh": {lin("eigh", (8, 8))}, "qr": {lin("qr", (8, 8), vectors=False)},
                      "householder_product": {lin("householder_product", (8, 8), k=8)},
                      "lu": {lin("lu", (8, 8))}}


# --------------------------------------------------------------------------- FFT, top-k


def test_ffts_count_their_radix_two_stages_on_every_axis():
    x = jnp.ones((4, 16), jnp.complex64)
    one_axis = 8 * 64 * 4  # 8 flops per element and stage, log2 16 = 4 stages
    for level in ("jaxpr", "hlo"):
        assert import_jax(jnp.fft.fft, x, level=level, strict=True).op_flops.sum() == one_axis
    ca = cost_analysis(jnp.fft.fft, x)
    assert ca["flops"] == one_axis  # XLA's own count
    y = jnp.ones((4, 16, 8))
    for level in ("jaxpr", "hlo"):  # 4 + 3 stages
        g = import_jax(jnp.fft.rfft2, y, level=level, strict=True)
        assert g.op_flops[g.op_types.index("fft")] == 8 * 512 * (4 + 3)
    assert cost_analysis(jnp.fft.rfft2, y)["flops"] == 8 * 512 * (4 * 3)  # XLA multiplies


@pytest.mark.parametrize("fn", [functools.partial(jax.lax.top_k, k=3),
                                functools.partial(jax.lax.approx_max_k, k=3)])
def test_top_k_counts_a_running_top_k_per_row(fn):
    x = jnp.ones((4, 100))
    for level in ("jaxpr", "hlo"):  # the CPU's TopK call at the HLO level
        g = import_jax(lambda a: fn(a)[0], x, level=level, strict=True)
        assert [f for t, f in zip(g.op_types, g.op_flops) if t in ("top_k", "approx_top_k",
                                                                   "custom-call")] == [400 * 2]


# --------------------------------------------------------------------------- random bits


def dropout(key, x):
    keep = jax.random.bernoulli(key, 0.9, x.shape)
    return jnp.where(keep, x / 0.9, 0.0)


def test_random_bits_count_xla_lowering_once_per_signature(monkeypatch):
    key, x = jax.random.key(0), jnp.ones((64, 64))
    bits = import_jax(lambda k: jax.random.bits(k, (64, 64)), key, strict=True)
    alone, fallback = hlo_module.count_flops(hlo_module.compiled_text(
        lambda k: jax.random.bits(k, (64, 64)), key))
    assert not fallback and bits.op_flops[bits.op_types.index("random_bits")] == alone
    assert alone > 50 * 64 * 64  # threefry: tens of integer ops per 32 random bits

    calls = []
    lowered = hlo_module.lowered_flops
    monkeypatch.setattr(hlo_module, "lowered_flops", lambda e: calls.append(e) or lowered(e))

    def two_layers(k, a):
        k1, k2 = jax.random.split(k)
        return dropout(k2, jnp.tanh(dropout(k1, a)))

    g = import_jax(two_layers, key, x, strict=True)
    assert [e.primitive.name for e in calls] == ["random_split", "random_bits"]  # one each
    hlo = import_jax(two_layers, key, x, level="hlo", strict=True)
    assert g.op_flops.sum() == pytest.approx(hlo.op_flops.sum(), rel=0.02)
    state = jnp.zeros(4, jnp.uint32)
    import_jax(lambda s: jax.lax.rng_bit_generator(s, (8, 8)), state, strict=True)


def test_a_primitive_xla_cannot_count_still_takes_the_named_fallback():
    def f(a):  # a host callback: an opaque custom call once lowered
        return jax.pure_callback(lambda b: b * 2, jax.ShapeDtypeStruct(a.shape, a.dtype), a)
    with pytest.warns(FallbackWarning, match=r"pure_callback ×1"):
        g = import_jax(f, jnp.ones((4, 4)))
    assert g.op_flops[g.op_types.index("pure_callback")] == 16  # one per output element
    with pytest.raises(ImporterError, match=r"unsupported primitive 'pure_callback'"):
        import_jax(f, jnp.ones((4, 4)), strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        import_jax(jnp.linalg.cholesky, SQUARE)  # no longer a fallback
    printed = import_jax(lambda a: (jax.debug.print("{}", a.sum()), a * 2)[1], SQUARE,
                         strict=True)  # a debug print runs on the host: no device flops
    assert printed.op_flops.sum() == 24 + 25 and "debug_print" in printed.op_types


# --------------------------------------------------------------------------- shard_map


MESH = AbstractMesh((2, 3), ("x", "y"), axis_types=(AxisType.Auto,) * 2)


def sharded(axes):
    """``tanh(a @ w)`` with the contraction split over ``x``, summed across it."""
    def body(a, w):
        return jax.lax.psum(jnp.tanh(a @ w), "x")
    return jax.shard_map(body, mesh=MESH, in_specs=(P(None, "x"), P("x", None)),
                         out_specs=P(), axis_names=axes)


@pytest.mark.parametrize("axes, shards", [({"x"}, 2), ({"x", "y"}, 6)])
def test_shard_map_counts_its_body_once_per_shard(axes, shards):
    a, w = jnp.ones((8, 16)), jnp.ones((16, 4))
    with jax.sharding.use_abstract_mesh(MESH):
        g = import_jax(sharded(axes), a, w, strict=True)
    body = 2 * 8 * 4 * 8 + 8 * 4 + 8 * 4  # the shard's product (K = 8), tanh, psum
    assert g.op_types[2:] == ("shard_map",) and g.op_flops[2] == shards * body
    assert g.tensor_size[2] == 8 * 4 * 4  # the program's (global) output


def test_solver_call_names_cover_the_platforms():
    for target, routine in [("lapack_ssyevd_ffi", "syevd"), ("lapack_zheevd_ffi", "heevd"),
                            ("cusolver_syevd_ffi", "syevd"), ("lapack_dgesdd_ffi", "gesdd"),
                            ("cublas_geqrf_batched_ffi", "geqrf"),
                            ("hipsolver_getrf_ffi", "getrf"),
                            ("__cublas$triangularSolve", "triangularSolve"),
                            ("lapack_csytrd_ffi", "sytrd")]:
        assert hlo_module.SOLVER_CALL.fullmatch(target).group(1) == routine, target
    assert not hlo_module.SOLVER_CALL.fullmatch("lapack_sgemm_ffi")
