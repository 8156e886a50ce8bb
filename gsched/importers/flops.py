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
* **sort**: ``elements · ceil(log2(n))``, ``n`` the sorted dimension's size.
* **data movement** (reshape, broadcast, transpose, slice, gather, concatenate, pad, copy,
  iota, constants, parameters, tuples, ...): 0.
* **anything else** (an unknown primitive or opcode, custom calls, random-bit generators):
  the generic fallback, one flop per output element; the importer reports which
  primitives used it (a warning, or an error with ``strict=True``).
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
    "logaddexp", "mulhi", "eq_to", "le_to", "lt_to", "psum", "pmax", "pmin",
})
DATA_MOVEMENT = frozenset({
    "broadcast_in_dim", "reshape", "transpose", "squeeze", "expand_dims", "slice",
    "dynamic_slice", "dynamic_update_slice", "gather", "concatenate", "pad", "rev", "iota",
    "copy", "copy_p", "device_put", "bitcast_convert_type", "sharding_constraint",
    "optimization_barrier", "split", "stop_gradient", "random_wrap", "random_unwrap",
    "scatter", "full", "mesh_cast", "reshard", "pvary", "name", "tie_in",
    "empty", "empty2", "stack", "unstack", "tile", "after_all", "create_token", "axis_index",
    "layout_constraint", "zeros_like", "pbroadcast", "freeze", "platform_index", "ppermute",
    "all_gather", "all_to_all",
    "get", "swap", "program_id", "num_programs", "multiple_of",  # in Pallas kernels
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
