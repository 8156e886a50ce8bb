"""Flop formulas shared by the jaxpr and HLO importers (docs/importers.md lists them).

Everything here works on plain shapes (tuples of ints), so the jaxpr importer (primitive
names) and the HLO importer (opcodes) count the same operation the same way:

* **dot** (``dot_general`` / ``dot``): ``2 · out_elements · K``, ``K`` the product of the
  contracting dimensions (one multiply and one add per term), as XLA's ``HloCostAnalysis``.
* **convolution** (``conv_general_dilated`` / ``convolution``): ``2 · out_batch ·
  out_features · kernel_in_features · Π_d pairs_d``, where ``pairs_d`` counts the (output
  position, kernel position) pairs of spatial dimension ``d`` that land on a real input
  element — padding and the holes of an lhs dilation are skipped, exactly as XLA counts
  them; feature and batch groups are covered by using the kernel's input-feature size.
* **elementwise** (arithmetic, comparisons, selects, conversions, transcendentals): one flop
  per output element. XLA reports transcendental functions (exp, log, tanh, ...) apart, as
  ``transcendentals``; we count them as flops (they occupy the same units for a roofline),
  so totals are compared with ``flops + transcendentals``. ``integer_pow`` ``x**n`` costs
  the multiplications of exponentiation by squaring, ``floor(log2 |n|) + popcount(|n|) − 1``
  per element (at least 1; one more for a negative ``n``).
* **reductions**: ``in_elements − out_elements`` applications of the reducer per reduced
  operand (``reduce_sum`` of ``n`` values is ``n − 1`` adds), times the reducer's own flops
  when the reducer is a computation (HLO ``reduce``; ``argmax`` in a jaxpr counts 1).
* **windowed reductions** (``reduce_window*``, pooling): ``out_elements · (window_elements −
  1)`` reducer applications (as XLA); ``select_and_scatter_add`` / ``select_and_gather_add``
  (pooling gradients): ``source_elements · window_elements`` (XLA counts its own lowering of
  these, which on CPU is several times more).
* **cumulative ops** (``cumsum``, ``cummax``, ...): one flop per element.
* **sort**: ``elements · ceil(log2(n))``, ``n`` the sorted dimension's size; **top-k**
  (``top_k``, ``approx_top_k``, the ``TopK`` calls): ``elements · max(1, ceil(log2 k))``.
* **FFT** (``fft``, any of its four types): ``8 · operand_elements · Σ_d ceil(log2 n_d)`` over
  the transform lengths ``n_d`` — XLA's constant (four fused multiply-adds per element and
  radix-2 stage); XLA's own cost analysis multiplies the per-axis ``floor(log2 n_d)``
  instead of adding them, which agrees for one power-of-two axis and overcounts transforms
  over several axes.
* **dense linear algebra** (:func:`linalg_flops`; jaxpr primitives, LAPACK / cuSOLVER
  calls): the standard leading-order counts of LAPACK Working Note 41 and Golub & Van Loan,
  per matrix of the batch, ×4 for complex types.
* **data movement** (reshape, broadcast, transpose, slice, gather, concatenate, pad, copy,
  iota, constants, parameters, tuples, ...): 0.
* **anything else**: at the jaxpr level, what the HLO level counts of XLA's lowering of
  that one equation for the CPU (random-bit generators, for instance); where that is not
  possible, and at the HLO level for unknown opcodes and custom calls, the generic
  fallback, one flop per output element; the importer reports which primitives used it (a
  warning, or an error with ``strict=True``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Shape = tuple[int, ...]


def elements(shape: Sequence[int]) -> int:
    """The number of elements of an array of ``shape``."""
    return math.prod(int(d) for d in shape)


def dot_flops(out_shape: Sequence[int], lhs_shape: Sequence[int],
              lhs_contracting: Sequence[int]) -> int:
    """``2 · out_elements · Π lhs[contracting]``."""
    return 2 * elements(out_shape) * math.prod(int(lhs_shape[d]) for d in lhs_contracting)


def attention_flops(query_elements: int, output_elements: int, keys: int, backward: bool,
                    flash: bool = True) -> int:
    """cuDNN fused attention's matrix products, per query head over ``keys`` key positions: the
    forward ``Q·Kᵀ`` (``2·keys`` per element of ``Q``) and ``P·V`` (per element of the output);
    the backward ``dQ``, ``dK`` (per element of ``Q``), ``dP``, ``dV`` (per element of ``dO``)
    and, in flash attention, ``Q·Kᵀ`` again. Softmax, masks, bias and dropout: not counted."""
    per_query, per_output = (2 + flash, 2) if backward else (1, 1)
    return 2 * keys * (per_query * query_elements + per_output * output_elements)


def _valid_pairs(in_size: int, kernel: int, out_size: int, stride: int, pad_lo: int,
                 lhs_dilation: int, rhs_dilation: int) -> int:
    """(output, kernel) position pairs of one spatial dimension that read a real input."""
    dilated = (in_size - 1) * lhs_dilation + 1 if in_size else 0
    count = 0
    for k in range(kernel):
        for o in range(out_size):
            pos = o * stride + k * rhs_dilation - pad_lo
            if 0 <= pos < dilated and pos % lhs_dilation == 0:
                count += 1
    return count


def conv_flops(lhs_spatial: Sequence[int], kernel_spatial: Sequence[int],
               out_spatial: Sequence[int], out_batch: int, out_features: int,
               kernel_in_features: int, strides: Sequence[int],
               padding_lo: Sequence[int], lhs_dilation: Sequence[int],
               rhs_dilation: Sequence[int]) -> int:
    """See the module docstring; all sequences are per spatial dimension."""
    pairs = 1
    for d in range(len(out_spatial)):
        pairs *= _valid_pairs(int(lhs_spatial[d]), int(kernel_spatial[d]), int(out_spatial[d]),
                              int(strides[d]), int(padding_lo[d]), int(lhs_dilation[d]),
                              int(rhs_dilation[d]))
    return 2 * int(out_batch) * int(out_features) * int(kernel_in_features) * pairs


def integer_pow_flops(out_shape: Sequence[int], exponent: int) -> int:
    """Multiplications of exponentiation by squaring, per element (see the module doc)."""
    n = abs(int(exponent))
    per = max(1, n.bit_length() - 1 + n.bit_count() - 1) if n else 1
    return elements(out_shape) * (per + (1 if exponent < 0 else 0))


def reduce_flops(in_shape: Sequence[int], out_shape: Sequence[int], operands: int = 1,
                 reducer_flops: int = 1) -> int:
    """``(in − out) · operands · reducer_flops`` (at least 0)."""
    return max(0, elements(in_shape) - elements(out_shape)) * operands * reducer_flops


def sort_flops(shape: Sequence[int], dimension: int) -> int:
    """``elements · ceil(log2 n)`` for a sort along ``dimension`` of size ``n``."""
    n = int(shape[dimension]) if shape else 1
    return elements(shape) * max(1, math.ceil(math.log2(n))) if n > 1 else 0


def top_k_flops(shape: Sequence[int], k: int) -> int:
    """``elements · max(1, ceil(log2 k))``: a running top-``k`` per row."""
    return elements(shape) * max(1, math.ceil(math.log2(max(1, int(k)))))


def fft_flops(operand_shape: Sequence[int], lengths: Sequence[int]) -> int:
    """``8 · operand_elements · Σ_d ceil(log2 n_d)`` (see the module docstring)."""
    stages = sum(math.ceil(math.log2(n)) for n in map(int, lengths) if n > 1)
    return 8 * elements(operand_shape) * stages


def _householder(m: int, n: int, k: int) -> float:
    """``4mnk − 2(m+n)k² + 4k³/3``: ``k`` Householder reflectors on an ``m × n`` matrix
    (``geqrf`` with ``k = min(m, n)``, ``orgqr``)."""
    return 4 * m * n * k - 2 * (m + n) * k * k + 4 * k ** 3 / 3


def _svd(m: int, n: int, vectors: str) -> float:
    """Golub–Reinsch SVD of an ``m × n`` matrix (Golub & Van Loan, table 8.6.1), ``vectors``
    ``"none"``, ``"thin"`` (``U₁``, ``V``) or ``"full"`` (``U``, ``V``)."""
    m, n = max(m, n), min(m, n)
    if vectors == "none":
        return 4 * m * n * n - 4 * n ** 3 / 3
    if vectors == "thin":
        return 14 * m * n * n + 8 * n ** 3
    return 4 * m * m * n + 8 * m * n * n + 9 * n ** 3


LINALG_KINDS = ("lu", "cholesky", "triangular_solve", "qr", "householder_product", "ormqr",
                "eigh", "eig", "schur", "hessenberg", "tridiagonal", "tridiagonal_solve",
                "svd", "symmetric_product")


def linalg_flops(kind: str, shape: Sequence[int], *, other: Sequence[int] = (), k: int = 0,
                 vectors: str | bool = True, complex_: bool = False) -> int:
    """Flops of one dense linear-algebra routine over a batch of matrices ``shape`` ``[...,
    m, n]`` (leading dimensions are the batch), ``× 4`` when ``complex_``:

    * ``lu`` (``getrf``): ``2mnk − (m+n)k² + 2k³/3``, ``k = min(m, n)`` (``2n³/3`` square);
    * ``cholesky`` (``potrf``): ``n³/3``;
    * ``triangular_solve`` (``trsm``): ``order(A) · elements(B)``, ``other`` = ``B``'s
      shape (``m²n`` solving from the left, ``mn²`` from the right);
    * ``qr``: ``geqrf`` (reflectors, ``k = min(m, n)``) plus, when ``vectors`` is
      ``"thin"`` or ``"full"``, ``orgqr`` forming ``Q`` (``m × k`` or ``m × m``);
    * ``householder_product`` (``orgqr``): ``4mnk − 2(m+n)k² + 4k³/3`` for ``k``
      reflectors;
    * ``ormqr`` (apply ``k`` reflectors to ``C`` = ``other`` ``[..., m, n]``, from the
      left): ``4mnk − 2nk²``;
    * ``eigh``: ``9n³`` with eigenvectors, ``4n³/3`` without (symmetric QR algorithm);
    * ``eig``: ``25n³`` with eigenvectors, ``10n³`` without; ``schur``: the same with and
      without Schur vectors; ``hessenberg``: ``10n³/3``; ``tridiagonal``: ``4n³/3``;
    * ``tridiagonal_solve`` (Thomas algorithm): ``(3 + 5·nrhs)·n``, ``other`` = the
      right-hand sides ``[..., n, nrhs]``;
    * ``svd``: Golub–Reinsch, ``vectors`` ``"none"``, ``"thin"`` or ``"full"`` (``_svd``);
    * ``symmetric_product`` (``syrk``, ``A`` ``[..., n, k]``): ``n²k``.
    """
    dims = [int(d) for d in shape]
    batch = elements(dims[:-2]) if len(dims) > 2 else 1
    m, n = (dims[-2], dims[-1]) if len(dims) >= 2 else (1, dims[-1] if dims else 1)
    r = min(m, n)
    scale = 4 if complex_ else 1
    if kind == "lu":
        per = 2 * m * n * r - (m + n) * r * r + 2 * r ** 3 / 3
    elif kind == "cholesky":
        per = n ** 3 / 3
    elif kind == "triangular_solve":
        return int(round(n * elements(other) * scale))
    elif kind == "qr" and vectors in ("thin", "full"):  # and orgqr, counted apart as called
        q = (*dims[:-2], m, m if vectors == "full" else r)
        return (linalg_flops(kind, shape, vectors=False, complex_=complex_)
                + linalg_flops("householder_product", q, k=r, complex_=complex_))
    elif kind == "qr":
        per = _householder(m, n, r)
    elif kind == "householder_product":
        per = _householder(m, n, k)
    elif kind == "ormqr":
        c = [int(d) for d in other]
        per = 4 * c[-2] * c[-1] * k - 2 * c[-1] * k * k
    elif kind == "eigh":
        per = 9 * n ** 3 if vectors else 4 * n ** 3 / 3
    elif kind in ("eig", "schur"):
        per = 25 * n ** 3 if vectors else 10 * n ** 3
    elif kind == "hessenberg":
        per = 10 * n ** 3 / 3
    elif kind == "tridiagonal":
        per = 4 * n ** 3 / 3
    elif kind == "tridiagonal_solve":
        rhs = [int(d) for d in other]
        return int(round(elements(rhs[:-2]) * (3 + 5 * rhs[-1]) * rhs[-2] * scale))
    elif kind == "svd":
        per = _svd(m, n, vectors if isinstance(vectors, str) else "full")
    elif kind == "symmetric_product":
        per = m * m * n
    else:
        raise ValueError(f"unknown linear-algebra kind {kind!r} (one of {LINALG_KINDS})")
    return int(round(batch * max(0.0, per) * scale))


# --- jaxpr primitive families --------------------------------------------------------------

TRANSCENDENTAL = frozenset({
    "exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sin", "cos", "tan", "asin",
    "acos", "atan", "atan2", "sinh", "cosh", "asinh", "acosh", "atanh", "sqrt", "rsqrt", "cbrt",
    "pow", "erf", "erfc", "erf_inv", "lgamma", "digamma", "igamma", "igammac", "igamma_grad_a",
    "random_gamma_grad", "bessel_i0e", "bessel_i1e", "polygamma", "zeta", "regularized_incomplete_beta",
})
ELEMENTWISE = TRANSCENDENTAL | frozenset({
    "add", "add_any", "sub", "mul", "div", "rem", "max", "min", "neg", "abs", "sign", "floor",
    "ceil", "round", "is_finite", "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor", "not",
    "select_n", "clamp", "nextafter", "square", "reciprocal", "convert_element_type",
    "reduce_precision", "shift_left", "shift_right_logical", "shift_right_arithmetic",
    "population_count", "clz", "real", "imag", "conj", "complex", "copysign",
    "logaddexp", "mulhi", "eq_to", "le_to", "lt_to",
})
# Collectives inside ``shard_map`` (per shard): a reduction across shards combines each
# element of each operand once (``COLLECTIVE_REDUCE``: one flop per output element of every
# operand; ``COLLECTIVE_SCATTER``: per input element, the output being a slice); the others
# move data.
COLLECTIVE_REDUCE = frozenset({
    "psum", "pmax", "pmin", "psum_invariant", "unreduced_psum", "psum_start",
    "psum_invariant_start", "unreduced_psum_start",
})
COLLECTIVE_SCATTER = frozenset({"reduce_scatter", "reduce_scatter_start",
                                "unreduced_reduce_scatter", "unreduced_reduce_scatter_start"})
DATA_MOVEMENT = frozenset({
    "broadcast_in_dim", "reshape", "transpose", "squeeze", "expand_dims", "slice",
    "dynamic_slice", "dynamic_update_slice", "gather", "concatenate", "pad", "rev", "iota",
    "copy", "copy_p", "device_put", "bitcast_convert_type", "sharding_constraint",
    "optimization_barrier", "split", "stop_gradient", "random_wrap", "random_unwrap",
    "scatter", "full", "mesh_cast", "reshard", "pvary", "name", "tie_in",
    "empty", "empty2", "stack", "unstack", "tile", "after_all", "create_token", "axis_index",
    "layout_constraint", "zeros_like", "pbroadcast", "freeze", "platform_index", "ppermute",
    "all_gather", "all_to_all", "ragged_all_to_all", "all_gather_invariant",
    "all_gather_reduced", "psend", "precv", "preduced", "vary_unreduced_cast_p",
    "all_gather_start", "all_gather_reduced_start", "all_to_all_start", "pbroadcast_start",
    "ppermute_start", "all_gather_done", "psum_done", "reduce_scatter_done", "all_to_all_done",
    "pbroadcast_done", "ppermute_done", "lu_pivots_to_permutation",
    "get", "swap", "program_id", "num_programs", "multiple_of",  # in Pallas kernels
    "debug_callback", "debug_print",  # host side: no flops on the device
})
REDUCTIONS = frozenset({
    "reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or",
    "reduce_xor", "argmax", "argmin", "reduce",
})
CUMULATIVE = frozenset({"cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"})
SCATTER_COMBINE = frozenset({"scatter-add", "scatter_add", "scatter-mul", "scatter_mul",
                             "scatter-min", "scatter_min", "scatter-max", "scatter_max",
                             "scatter_sub", "scatter-sub"})
WINDOWED = frozenset({"reduce_window_sum", "reduce_window_max", "reduce_window_min",
                      "reduce_window", "cumsum_window"})
WINDOW_GRAD = frozenset({"select_and_scatter_add", "select_and_gather_add",
                         "select_and_scatter"})

# --- HLO opcode families -------------------------------------------------------------------

HLO_TRANSCENDENTAL = frozenset({
    "exponential", "exponential-minus-one", "log", "log-plus-one", "tanh", "logistic", "sine",
    "cosine", "tan", "atan2", "sqrt", "rsqrt", "cbrt", "power", "erf",
})
HLO_ELEMENTWISE = HLO_TRANSCENDENTAL | frozenset({
    "add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "negate", "abs",
    "sign", "floor", "ceil", "round-nearest-afz", "round-nearest-even", "compare", "select",
    "clamp", "and", "or", "xor", "not", "convert", "is-finite", "shift-left",
    "shift-right-logical", "shift-right-arithmetic", "popcnt", "count-leading-zeros", "real",
    "imag", "complex", "reduce-precision", "stochastic-convert", "atan2",
})
HLO_DATA_MOVEMENT = frozenset({
    "parameter", "constant", "broadcast", "reshape", "dynamic-reshape", "transpose", "slice",
    "dynamic-slice", "dynamic-update-slice", "gather", "concatenate", "pad", "reverse", "iota",
    "copy", "copy-start", "copy-done", "bitcast", "bitcast-convert", "tuple",
    "get-tuple-element", "after-all", "partition-id", "replica-id", "optimization-barrier",
    "add-dependency", "domain", "infeed", "outfeed", "send", "send-done", "recv", "recv-done",
    "get-dimension-size", "set-dimension-size", "scatter", "async-done", "async-update",
})
HLO_COLLECTIVE = frozenset({"all-reduce", "all-reduce-start", "reduce-scatter",
                            "all-reduce-done", "all-gather", "all-gather-start",
                            "all-gather-done", "all-to-all", "collective-permute",
                            "collective-permute-start", "collective-permute-done"})
