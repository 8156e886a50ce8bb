"""Import a compiled XLA module (HLO text) as a graph, one op per ENTRY instruction.

Input: the text of ``jax.jit(f).lower(*a).compile().as_text()`` or an XLA dump
(``*.after_optimizations.txt``; unscheduled modules too). Mapping:

* **ops**: one per instruction of the ENTRY computation, in the order of the text — for a
  scheduled module (``is_scheduled=true``, what ``compile().as_text()`` prints) that is XLA's
  schedule — except that all ``parameter`` instructions come first, by parameter number: they
  are the **program inputs** (``is_input``; SPEC §1 schedules them first anyway, and they
  have no dependencies, so moving them keeps every dependency). ``tuple`` and
  ``get-tuple-element`` are not ops: tuples are flattened so every tensor is an array (an
  instruction reading a tuple reads each of its leaves; ``get-tuple-element`` picks one). A
  ``fusion`` stays one op; so do ``while``, ``conditional`` and ``call``. Constants are
  ordinary ops without dependencies.
* **tensors**: one per array leaf of an op's result shape (a tuple-shaped fusion or while
  makes several), size = elements × itemsize (``pred`` 1 byte, 4-bit types half a byte,
  tokens 0). ``control-predecessors={...}`` become size-0 control tensors.
* **op fields**: ``op`` = the opcode (``fusion``, ``dot``, ``while``, ...), ``name`` = the
  instruction name, ``scope`` = the ``metadata={op_name="..."}`` path without its first
  component when that is the outer ``jit(...)`` and without its last component (the
  primitive), e.g. ``jit(f)/layer/dot_general`` → ``layer``; ``op_flops`` from
  :mod:`gsched.importers.flops` on the instruction — for a fusion, call or async op the sum
  over its called computation, for ``while`` ``(cond + body) × known_trip_count`` (from the
  ``backend_config`` XLA writes when it knows the trip count; one trip otherwise), for
  ``conditional`` the most expensive branch; ``compute_cost = flops / peak_flops``.
* **GPU library calls** (a GPU module's ``custom-call``s): cuBLAS products count the dot of
  their ``backend_config``'s dimension numbers, cuDNN convolutions the forward convolution
  they compute or differentiate (:data:`GEMM_TARGETS`, :data:`CONV_ROLES`); their workspace
  (the last, 1-D ``s8``/``u8`` result leaf) is the op's ``temporary_memory``, not a tensor.
  cuDNN fused attention counts its matrix products (:data:`ATTENTION_FORWARD`).
* **dense linear algebra and top-k** (``custom-call``s on any platform): LAPACK on the CPU,
  cuSOLVER / cuBLAS on a GPU (:data:`SOLVER_CALL`), XLA's own (:data:`XLA_LINALG`: the
  ``cholesky`` and ``triangular-solve`` opcodes and the calls a TPU module has before
  optimization), ``TopK``; the ``fft`` opcode. Other custom calls take the generic fallback,
  named by target (docs/importers.md).

:func:`compile_for` compiles a JAX function for a chosen backend (default the CPU, so
``import_jax(..., level="hlo")`` gives the same graph on every machine).

**Parsing.** jaxlib's own parser (``hlo_module_from_text``, reached through
``jax._src.lib.xla_client.hlo``) checks the text first when this jaxlib has it: a syntax error
becomes an :class:`~gsched.importers.jaxpr.ImporterError` with the line and column it reports.
Its Python objects expose only instruction names, opcodes and operands — not shapes or
attributes — so the instruction lines themselves are read by the small reader below (which
also runs alone, with its own line-numbered errors, where jaxlib has no parser); the set of
ENTRY instructions both found is cross-checked.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass, field

import numpy as np

from gsched.core.graph import Graph, make_graph
from gsched.importers import flops as F
from gsched.importers.jaxpr import FallbackWarning, ImporterError
from gsched.importers.presets import preset
from gsched.infra.distributed import shapes_on

ITEMSIZE = {
    "pred": 1, "s2": 0.25, "u2": 0.25, "s4": 0.5, "u4": 0.5, "s8": 1, "u8": 1, "s16": 2,
    "u16": 2, "s32": 4, "u32": 4, "s64": 8, "u64": 8, "f16": 2, "bf16": 2, "f32": 4, "f64": 8,
    "c64": 8, "c128": 16, "f8e5m2": 1, "f8e4m3fn": 1, "f8e4m3b11fnuz": 1, "f8e5m2fnuz": 1,
    "f8e4m3fnuz": 1, "f8e4m3": 1, "f8e3m4": 1, "f8e8m0fnu": 1, "f4e2m1fn": 0.5, "token": 0,
    "opaque": 0,
}


@dataclass
class Instr:
    """One parsed instruction line."""

    name: str
    shape: object  # ("array", dtype, dims) or ("tuple", [shapes])
    opcode: str
    operands: list[str]
    attrs: dict[str, str]
    line: int  # 1-based line in the text
    raw_operands: str = ""
    root: bool = False


@dataclass
class Module:
    computations: dict[str, list[Instr]] = field(default_factory=dict)
    entry: str = ""
    scheduled: bool = False


def _fail(line: int, message: str):
    raise ImporterError(f"malformed HLO text, line {line}: {message}")


# --- shapes -------------------------------------------------------------------------------

_DTYPE = re.compile(r"([a-z][a-z0-9]*)\[")


def parse_shape(text: str, pos: int, line: int) -> tuple[object, int]:
    """The shape starting at ``text[pos]``; returns (shape, position after it)."""
    if text.startswith("(", pos):
        pos += 1
        parts = []
        while True:
            while text.startswith(" ", pos):
                pos += 1
            if text.startswith(")", pos):
                return ("tuple", parts), pos + 1
            shape, pos = parse_shape(text, pos, line)
            parts.append(shape)
            while text.startswith(" ", pos):
                pos += 1
            if text.startswith(",", pos):
                pos += 1
            elif not text.startswith(")", pos):
                _fail(line, f"expected ',' or ')' in a tuple shape at column {pos + 1}")
    m = _DTYPE.match(text, pos)
    if not m:
        _fail(line, f"expected a shape at column {pos + 1}: {text[pos:pos + 30]!r}")
    dtype = m.group(1)
    end = text.find("]", m.end())
    if end < 0:
        _fail(line, "unclosed '[' in a shape")
    dims = []
    for d in filter(None, (s.strip() for s in text[m.end():end].split(","))):
        d = d.removeprefix("<=")
        if not d.isdigit():
            _fail(line, f"bad dimension {d!r} in shape")
        dims.append(int(d))
    pos = end + 1
    if text.startswith("{", pos):  # layout, may nest parentheses and braces
        pos = _skip_balanced(text, pos, line)
    if dtype not in ITEMSIZE:
        _fail(line, f"unknown element type {dtype!r}")
    return ("array", dtype, tuple(dims)), pos


# a whole double-quoted string (escapes inside), a quote that opens a string never closed, or
# a bracket or comma outside strings
_STRUCTURE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|(")|([{}()\[\],])', re.DOTALL)


def _structure(text: str, pos: int = 0):
    """``(index, char)`` of every bracket and comma of ``text`` from ``pos`` that is outside a
    double-quoted string (escaped characters skipped), and at the end whether a string was
    left open, as ``(len(text), None)`` or ``(len(text), '"')``. A regular expression steps
    over everything else, so long attribute values cost little."""
    for m in _STRUCTURE.finditer(text, pos):
        if m.group(1):
            yield len(text), '"'
            return
        if m.group(2):
            yield m.start(), m.group(2)
    yield len(text), None


_CLOSER = {"{": "}", "(": ")", "[": "]"}
_NESTED = re.compile(r'[{}()\[\]"]')


def _skip_balanced(text: str, pos: int, line: int) -> int:
    """The index just past the bracket group that opens at ``text[pos]``."""
    inner = _NESTED.search(text, pos + 1)  # most groups (layouts, operands) have no nesting
    if inner and inner.group() == _CLOSER.get(text[pos]):
        return inner.end()
    stack = []
    for i, c in _structure(text, pos):
        if c in _CLOSER:
            stack.append(_CLOSER[c])
        elif stack and c == stack[-1]:
            stack.pop()
            if not stack:
                return i + 1
        elif c is not None and c in ")}]":
            _fail(line, f"unbalanced {c!r} at column {i + 1}")
    _fail(line, f"unclosed {text[pos]!r} at column {pos + 1}")


def leaves(shape) -> list[tuple[str, tuple[int, ...]]]:
    """The array leaves of a (possibly nested tuple) shape, in order."""
    if shape[0] == "array":
        return [(shape[1], shape[2])]
    return [leaf for part in shape[1] for leaf in leaves(part)]


def leaf_bytes(dtype: str, dims) -> float:
    """elements × itemsize, rounded up to whole bytes for sub-byte types."""
    return float(np.ceil(F.elements(dims) * ITEMSIZE[dtype]))


# --- instruction lines --------------------------------------------------------------------

_COMMENT = re.compile(r"/\*.*?\*/")  # /*index=5*/ markers in long operand lists
_HEADER = re.compile(r"^(ENTRY\s+)?%?([^\s(]+)\s*(\(.*\)\s*->\s*.*)?\{\s*$")
_INSTR = re.compile(r"^(ROOT\s+)?%?([^\s=]+)\s*=\s*")
_OPCODE = re.compile(r"\s*([a-z][a-z0-9\-_$]*)\(")


def _split_top(text: str, line: int) -> list[str]:
    """Splits at top-level commas (outside brackets and strings)."""
    if not _NESTED.search(text):
        return [p.strip() for p in text.split(",") if p.strip()]
    parts, depth, start = [], 0, 0
    for i, c in _structure(text):
        if i == len(text):
            if depth or c is not None:
                _fail(line, "unbalanced brackets or quotes in the attributes")
        elif c in "{([":
            depth += 1
        elif c in "})]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def parse_instruction(text: str, line: int) -> Instr:
    """One instruction line: ``[ROOT] %name = SHAPE opcode(operands), attr=value, ...``."""
    m = _INSTR.match(text)
    if not m:
        _fail(line, f"expected '%name = shape opcode(...)', got {text[:60]!r}")
    shape, pos = parse_shape(text, m.end(), line)
    op = _OPCODE.match(text, pos)
    if not op:
        _fail(line, f"expected an opcode followed by '(' at column {pos + 1}")
    start = op.end() - 1
    end = _skip_balanced(text, start, line)
    raw = text[start + 1:end - 1]
    opcode = op.group(1)
    operands = []
    if opcode not in ("parameter", "constant"):
        for part in _split_top(raw, line):
            token = part.split()[-1]  # "f32[2]{0} %a" prints the shape first in some modes
            operands.append(token.lstrip("%"))
    attrs = {}
    rest = text[end:].strip()
    if rest:
        if not rest.startswith(","):
            _fail(line, f"unexpected text after the operands: {rest[:40]!r}")
        for part in _split_top(rest[1:], line):
            key, eq, value = part.partition("=")
            if not eq:
                _fail(line, f"attribute without '=': {part[:40]!r}")
            attrs[key.strip()] = value.strip()
    return Instr(m.group(2), shape, opcode, operands, attrs, line, raw, bool(m.group(1)))


def _check_operands(instrs: list[Instr]) -> None:
    defined = {i.name for i in instrs}
    for ins in instrs:
        for operand in ins.operands:
            if operand not in defined:
                _fail(ins.line, f"operand %{operand} of {ins.name!r} is not defined in its "
                                "computation")


def parse_module(text: str) -> Module:
    """The computations of an HLO module text (see the module docstring)."""
    module = Module()
    current: list[Instr] | None = None
    current_name, open_line = "", 0
    entries = []
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = _COMMENT.sub("", raw).strip()
        if not stripped or stripped.startswith("//"):
            continue
        if current is None:
            if stripped.startswith("HloModule"):
                module.scheduled = "is_scheduled=true" in stripped
                continue
            header = _HEADER.match(stripped)
            if header and " = " not in stripped.split("(")[0]:
                current_name, open_line = header.group(2), number
                if current_name in module.computations:
                    _fail(number, f"computation {current_name!r} is defined twice")
                current = module.computations.setdefault(current_name, [])
                if header.group(1):
                    entries.append((current_name, number))
            continue  # other top-level sections (FileNames, StackFrames, ...) are skipped
        if stripped == "}":
            if not current:
                _fail(number, f"computation {current_name!r} has no instructions")
            _check_operands(current)
            current = None
            continue
        current.append(parse_instruction(stripped, number))
    if current is not None:
        _fail(open_line, f"computation {current_name!r} is not closed with '}}'")
    if len(entries) != 1:
        if not entries:
            raise ImporterError("malformed HLO text: no ENTRY computation")
        _fail(entries[1][1], "a second ENTRY computation")
    module.entry = entries[0][0]
    return module


# --- jaxlib's parser ------------------------------------------------------------------------

def _jaxlib_hlo():
    """jaxlib's HLO module (with ``hlo_module_from_text``), or None if this jaxlib has none."""
    try:
        from jax._src.lib import xla_client
    except ImportError:  # pragma: no cover
        return None
    hlo = getattr(xla_client, "hlo", None)
    return hlo if hasattr(hlo, "hlo_module_from_text") else None


_POSITION = re.compile(r"was parsing (\d+):(\d+): error: ([^\n]*)")


def check_with_jaxlib(text: str):
    """Parses ``text`` with jaxlib; a syntax error is an :class:`ImporterError` with the line
    and column jaxlib reports. Returns jaxlib's module, or None when this jaxlib has no HLO
    parser."""
    hlo = _jaxlib_hlo()
    if hlo is None:
        return None
    try:
        return hlo.hlo_module_from_text(text)
    except Exception as err:  # noqa: BLE001 - jaxlib raises its own runtime error types
        message = str(err)
        where = _POSITION.search(message)
        if where:
            raise ImporterError(f"malformed HLO text, line {where.group(1)}, column "
                                f"{where.group(2)}: {where.group(3).strip()}") from None
        lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
        raise ImporterError("malformed HLO text: " + (" ".join(lines[:2]) if lines
                                                      else type(err).__name__)) from None


def _cross_check(parsed, module: Module) -> None:
    """jaxlib and the line reader must see the same ENTRY instructions."""
    comps = {c.name: c for c in parsed.computations()}
    entry = comps.get(module.entry)
    mine = sorted(i.name for i in module.computations[module.entry])
    if entry is None or sorted(i.name for i in entry.instructions()) != mine:
        raise ImporterError("the HLO line reader and jaxlib disagree on the instructions of "
                            f"the ENTRY computation {module.entry!r}")


# --- flops --------------------------------------------------------------------------------

_TRIP = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"?(\d+)')
_CALLED = ("calls", "to_apply", "body", "condition", "branch_computations",
           "true_computation", "false_computation", "async_execution_thread")


def _names(value: str) -> list[str]:
    return [v.strip().lstrip("%") for v in value.strip("{}").split(",") if v.strip()]


def _ints(value: str) -> list[int]:
    return [int(v) for v in value.strip("{}").split(",") if v.strip()]


# GPU library calls XLA's GPU compiler emits: cuBLAS matrix products, counted as the dot of
# their backend_config's dimension numbers (as XLA's GPU cost analysis does) ...
GEMM_TARGETS = frozenset({"__cublas$gemm", "__cublas$lt$matmul", "__cublas$lt$matmul$f8"})
_GEMM_CONTRACTING = re.compile(r'"lhs_contracting_dimensions"\s*:\s*\[([^\]]*)\]')
# ... and cuDNN convolutions, counted as the forward convolution they compute or
# differentiate (the same multiply-adds; XLA's cost analysis applies the forward formula to
# the call's own operands, which differs for the backward kinds): where that convolution's
# input, kernel and output are (k ≥ 0: operand k; −1: the result's first leaf); the call's
# window and dim_labels describe it.
CONV_ROLES = {
    "__cudnn$convForward": (0, 1, -1),
    "__cudnn$convBiasActivationForward": (0, 1, -1),
    "__cudnn$convForwardGraph": (0, 1, -1),
    "__cudnn$convBackwardInput": (-1, 1, 0),
    "__cudnn$convBackwardFilter": (0, -1, 1),
}


# ... and cuDNN's fused attention (what ``jax.nn.dot_product_attention(...,
# implementation="cudnn")`` lowers to), counted as its matrix products
# (:func:`gsched.importers.flops.attention_flops`, as the jaxpr level counts the same call),
# the key positions read from the backend_config's score tensor ``intermediate_tensor_shape``.
# Operands and results as JAX's lowering orders them: forward (Q, K, V, ...) → (O, ...);
# backward (Q, K, V, softmax statistics, dO, ...) → (dQ, dK, dV, ...).
ATTENTION_FORWARD = frozenset({"__cudnn$fmhaSoftmax", "__cudnn$fmhaScaleBiasSoftmax",
                               "__cudnn$fmhaSoftmaxDropout",
                               "__cudnn$fmhaScaleBiasSoftmaxDropout"})
ATTENTION_BACKWARD = frozenset(t + "Backward" for t in ATTENTION_FORWARD)


# Dense linear algebra: CPU LAPACK (``lapack_sgetrf_ffi``), GPU cuSOLVER / hipSOLVER
# (``cusolver_syevd_ffi``), batched cuBLAS / hipBLAS (``cublas_geqrf_batched_ffi``) and cuBLAS's
# triangular solve, counted by :func:`gsched.importers.flops.linalg_flops`. LAPACK-style FFI
# calls state what they compute in one-letter codes (``mode = 86 : ui8``, ``'V'``).
SOLVER_ROUTINES = {
    "getrf": "lu", "potrf": "cholesky", "trsm": "triangular_solve",
    "triangularSolve": "triangular_solve", "geqrf": "qr", "geqp3": "qr",
    "orgqr": "householder_product", "ungqr": "householder_product", "syevd": "eigh",
    "heevd": "eigh", "syevj": "eigh", "heevj": "eigh", "syev": "eigh", "heev": "eigh",
    "gesdd": "svd", "gesvd": "svd", "gesvdj": "svd", "gesvdp": "svd", "geev": "eig",
    "gees": "schur", "gehrd": "hessenberg", "sytrd": "tridiagonal", "hetrd": "tridiagonal",
    "gtsv": "tridiagonal_solve",
}
SOLVER_CALL = re.compile(r"(?:(?:lapack|cusolver|hipsolver|cublas|hipblas)_[sdcz]?|__cublas\$)("
                         + "|".join(sorted(SOLVER_ROUTINES, key=len, reverse=True))
                         + r")(?:_batched)?(?:_ffi)?")
# XLA's own linear algebra, which its TPU compiler expands (and JAX lowers to for a TPU): two
# opcodes and four custom calls, in modules before optimization.
XLA_LINALG = {"cholesky": "cholesky", "triangular-solve": "triangular_solve",
              "Qr": "qr", "ProductOfElementaryHouseholderReflectors": "householder_product",
              "LuDecomposition": "lu", "Eigh": "eigh"}
TOP_K_TARGETS = frozenset({"TopK", "__gpu$TopK"})
NO_FLOP_TARGETS = frozenset({"cu_lu_pivots_to_permutation", "hip_lu_pivots_to_permutation"})


def _flag(config: str, key: str) -> str:
    """A one-letter code of an FFI call's ``backend_config`` (``mode = 86 : ui8`` → ``"V"``;
    ``""`` when absent)."""
    m = re.search(rf"\b{key}\s*=\s*(\d+)", config)
    return chr(int(m.group(1))) if m else ""


def custom_call_target(ins: Instr) -> str:
    """A ``custom-call``'s ``custom_call_target`` (``""`` for any other instruction)."""
    if ins.opcode != "custom-call":
        return ""
    return ins.attrs.get("custom_call_target", "").strip('"')


def scratch_leaves(ins: Instr) -> int:
    """1 when ``ins`` is a cuBLAS/cuDNN call whose tuple result ends in its workspace (a 1-D
    ``s8``/``u8`` buffer only the library reads), else 0."""
    target = custom_call_target(ins)
    if not target.startswith(("__cublas$", "__cudnn$")) or ins.shape[0] != "tuple":
        return 0
    last = ins.shape[1][-1] if ins.shape[1] else None
    return int(len(ins.shape[1]) > 1 and last[0] == "array" and last[1] in ("s8", "u8")
               and len(last[2]) == 1)


class _Flops:
    def __init__(self, module: Module, strict: bool):
        self.module = module
        self.strict = strict
        self.shapes = {i.name: i.shape for c in module.computations.values() for i in c}
        self.memo: dict[str, int] = {}
        self.fallback: dict[str, int] = {}

    def computation(self, name: str, line: int) -> int:
        if name not in self.module.computations:
            _fail(line, f"calls unknown computation {name!r}")
        if name not in self.memo:
            self.memo[name] = 0  # a recursive call counts once
            self.memo[name] = sum(self.instr(i) for i in self.module.computations[name])
        return self.memo[name]

    def _called(self, ins: Instr, key: str) -> int:
        return sum(self.computation(n, ins.line) for n in _names(ins.attrs.get(key, "")))

    def _operand_dims(self, ins: Instr, k: int) -> tuple[int, ...]:
        if k >= len(ins.operands) or ins.operands[k] not in self.shapes:
            _fail(ins.line, f"{ins.opcode} {ins.name!r} has no operand {k} with a known shape")
        shape = self.shapes[ins.operands[k]]
        return leaves(shape)[0][1]

    def instr(self, ins: Instr) -> int:
        op = ins.opcode
        outs = leaves(ins.shape)
        out0 = outs[0][1] if outs else ()
        if op in ("fusion", "call", "async-start"):
            return self._called(ins, "calls") + self._called(ins, "to_apply")
        if op == "while":
            trip = _TRIP.search(ins.attrs.get("backend_config", ""))
            return (self._called(ins, "condition") + self._called(ins, "body")) * \
                (int(trip.group(1)) if trip else 1)
        if op == "conditional":
            names = _names(ins.attrs.get("branch_computations", "")) or [
                n for k in ("true_computation", "false_computation")
                for n in _names(ins.attrs.get(k, ""))]
            return max((self.computation(n, ins.line) for n in names), default=0)
        if op == "dot":
            lhs = self._operand_dims(ins, 0)
            return F.dot_flops(out0, lhs, _ints(ins.attrs.get("lhs_contracting_dims", "{}")))
        if op == "convolution":
            return self._conv(ins, self._operand_dims(ins, 0), self._operand_dims(ins, 1), out0)
        if op in F.HLO_ELEMENTWISE:
            return F.elements(out0)
        if op in F.HLO_DATA_MOVEMENT:
            return 0
        if op in ("reduce", "all-reduce", "all-reduce-start", "reduce-scatter"):
            reducer = self._called(ins, "to_apply") or 1
            if op != "reduce":
                return F.elements(out0) * reducer
            return F.reduce_flops(self._operand_dims(ins, 0), out0, 1, reducer)
        if op == "reduce-window":
            window = _window(ins.attrs.get("window", ""), ins.line)
            reducer = self._called(ins, "to_apply") or 1
            return F.elements(out0) * max(0, F.elements(window["size"]) - 1) * reducer
        if op == "scatter":
            updates = self._operand_dims(ins, len(ins.operands) - 1)
            return F.elements(updates) * self._called(ins, "to_apply")
        if op == "select-and-scatter":
            window = _window(ins.attrs.get("window", ""), ins.line)
            return F.elements(self._operand_dims(ins, 1)) * F.elements(window["size"])
        if op == "sort":
            dims = _ints(ins.attrs.get("dimensions", "{0}"))
            return F.sort_flops(out0, dims[0] if dims else 0)
        if op in F.HLO_COLLECTIVE:
            return 0
        if op == "fft":
            return F.fft_flops(self._operand_dims(ins, 0), _ints(ins.attrs.get("fft_length", "")))
        target = custom_call_target(ins)
        if target in TOP_K_TARGETS:
            return F.top_k_flops(self._operand_dims(ins, 0), out0[-1] if out0 else 1)
        solver = SOLVER_CALL.fullmatch(target)
        if solver or op in XLA_LINALG or target in XLA_LINALG:
            return self._linalg(ins, SOLVER_ROUTINES[solver.group(1)] if solver else
                                XLA_LINALG[target or op])
        if target in NO_FLOP_TARGETS:
            return 0
        if target in GEMM_TARGETS:
            dims = _GEMM_CONTRACTING.search(ins.attrs.get("backend_config", ""))
            if not dims:
                _fail(ins.line, f"{target} call {ins.name!r} has no lhs_contracting_dimensions "
                                "in its backend_config")
            contracting = [int(d) for d in re.findall(r"\d+", dims.group(1))]
            return F.dot_flops(out0, self._operand_dims(ins, 0), contracting)
        if target in CONV_ROLES:
            roles = [out0 if k < 0 else self._operand_dims(ins, k) for k in CONV_ROLES[target]]
            return self._conv(ins, *roles)
        if target in ATTENTION_FORWARD or target in ATTENTION_BACKWARD:
            return self._attention(ins, target, out0)
        kind = f"custom-call {target}" if target else op
        if self.strict:
            _fail(ins.line, f"unsupported {'' if target else 'opcode '}{kind!r} in instruction "
                            f"{ins.name!r} (strict=True; without it the generic fallback counts "
                            "one flop per output element)")
        self.fallback[kind] = self.fallback.get(kind, 0) + 1
        return sum(F.elements(d) for _, d in outs[:len(outs) - scratch_leaves(ins)])

    def _linalg(self, ins: Instr, kind: str) -> int:
        """A dense linear-algebra instruction or call (:data:`SOLVER_CALL`,
        :data:`XLA_LINALG`) of :func:`gsched.importers.flops.linalg_flops`'s ``kind``,
        counted on its first operand; what it computes (eigenvectors, ``U`` and ``V``) from
        its ``backend_config``."""
        a = self._operand_dims(ins, 0)
        dtype = leaves(self.shapes[ins.operands[0]])[0][0]
        config = ins.attrs.get("backend_config", "")
        other, k, vectors = (), 0, True
        if kind == "triangular_solve":
            other = leaves(ins.shape)[0][1]  # B, solved in place
        elif kind == "tridiagonal_solve":
            other = self._operand_dims(ins, 3)
        elif kind == "qr":
            vectors = False
        elif kind == "householder_product":
            k = self._operand_dims(ins, 1)[-1]
        elif kind in ("eigh", "schur"):
            vectors = _flag(config, "mode") != "N"
        elif kind == "eig":
            vectors = "V" in (_flag(config, "compute_left"), _flag(config, "compute_right"))
        elif kind == "svd":
            mode = _flag(config, "mode")
            vectors = "none" if mode == "N" or "compute_uv = false" in config else \
                "thin" if mode == "S" or "full_matrices = false" in config else "full"
        return F.linalg_flops(kind, a, other=other, k=k, vectors=vectors,
                              complex_=dtype in ("c64", "c128"))

    def _attention(self, ins: Instr, target: str, out: tuple[int, ...]) -> int:
        """A cuDNN fused attention call's matrix products (:data:`ATTENTION_FORWARD`): the
        key positions are the dimension of the score tensor that ``P·V`` (forward) or
        ``dS·K`` (backward) contracts."""
        backward = target in ATTENTION_BACKWARD
        product = "bmm1_grad_gemm2" if backward else "bmm2"
        try:
            config = json.loads(ins.attrs.get("backend_config", ""))["cudnn_fmha_backend_config"]
            scores = [int(d) for d in config["intermediate_tensor_shape"]["dimensions"]]
            keys = F.elements([scores[int(d)] for d in config[f"{product}_dot_dimension_numbers"][
                "lhs_contracting_dimensions"]])
            flash = bool(config.get("is_flash_attention", False))
        except (ValueError, KeyError, TypeError, IndexError) as err:
            _fail(ins.line, f"{target} call {ins.name!r} has no readable cudnn_fmha_backend_config"
                            f" ({type(err).__name__}: {err})")
        output = self._operand_dims(ins, 4) if backward else out  # dO, or the result O
        return F.attention_flops(F.elements(self._operand_dims(ins, 0)), F.elements(output),
                                 keys, backward, flash)

    def _conv(self, ins: Instr, lhs: tuple[int, ...], rhs: tuple[int, ...],
              out: tuple[int, ...]) -> int:
        """The convolution of ``ins``'s window and dim_labels over input ``lhs``, kernel
        ``rhs`` and output ``out``."""
        labels = ins.attrs.get("dim_labels", "")
        m = re.fullmatch(r"([a-z0-9]+)_([a-z0-9]+)->([a-z0-9]+)", labels)
        if not m:
            _fail(ins.line, f"convolution {ins.name!r} has bad dim_labels {labels!r}")
        lhs_l, rhs_l, out_l = m.groups()

        def spatial(labels_: str, dims) -> list[int]:
            pos = sorted((int(c), i) for i, c in enumerate(labels_) if c.isdigit())
            return [dims[i] for _, i in pos]

        n = len(spatial(out_l, out))
        window = _window(ins.attrs.get("window", ""), ins.line, n)
        return F.conv_flops(
            lhs_spatial=spatial(lhs_l, lhs), kernel_spatial=spatial(rhs_l, rhs),
            out_spatial=spatial(out_l, out), out_batch=out[out_l.index("b")],
            out_features=out[out_l.index("f")], kernel_in_features=rhs[rhs_l.index("i")],
            strides=window["stride"], padding_lo=window["pad_lo"],
            lhs_dilation=window["lhs_dilate"], rhs_dilation=window["rhs_dilate"])


def _window(text: str, line: int, rank: int | None = None) -> dict[str, list[int]]:
    """``window={size=3x3 stride=2x2 pad=0_1x0_1 lhs_dilate=1x1 rhs_dilate=1x1}``."""
    fields = dict(part.split("=", 1) for part in text.strip("{}").split() if "=" in part)
    if "size" not in fields and rank is None:
        _fail(line, f"window without a size: {text!r}")
    size = [int(x) for x in fields["size"].split("x")] if "size" in fields else [1] * rank
    rank = len(size)

    def per_dim(key: str, default: int) -> list[int]:
        return [int(x) for x in fields[key].split("x")] if key in fields else [default] * rank

    pads = [p.split("_") for p in fields["pad"].split("x")] if "pad" in fields else \
        [("0", "0")] * rank
    return {"size": size, "stride": per_dim("stride", 1), "pad_lo": [int(p[0]) for p in pads],
            "lhs_dilate": per_dim("lhs_dilate", 1), "rhs_dilate": per_dim("rhs_dilate", 1)}


# --- the graph ----------------------------------------------------------------------------

_OP_NAME = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')


def scope_of(ins: Instr) -> str:
    """The op_name path without the outer ``jit(...)`` and the primitive (module doc)."""
    m = _OP_NAME.search(ins.attrs.get("metadata", ""))
    if not m:
        return ""
    parts = m.group(1).split("/")
    if len(parts) > 1 and parts[0].startswith(("jit(", "pjit(")):
        parts = parts[1:]
    return "/".join(parts[:-1])


def import_hlo_text(text: str, device="v100", name: str = "", strict: bool = False) -> Graph:
    """An HLO module's text as a graph (see the module docstring). Raises
    :class:`ImporterError` with the line number for malformed text."""
    if not isinstance(text, str) or not text.strip():
        raise ImporterError("malformed HLO text: empty")
    parsed = check_with_jaxlib(text)
    module = parse_module(text)
    if parsed is not None:
        _cross_check(parsed, module)
    dev = preset(device)
    counter = _Flops(module, strict)
    entry = module.computations[module.entry]
    params = sorted((i for i in entry if i.opcode == "parameter"),
                    key=lambda i: int(i.raw_operands.strip() or 0))
    others = [i for i in entry if i.opcode != "parameter"]
    values: dict[str, object] = {}  # instruction -> nested list of tensor ids (tuple tree)
    sizes, producer, ports, control, temporary = [], [], [], [], []
    edges: dict[tuple[int, int], None] = {}
    ops = []  # (instr, flops)

    def build_value(shape, j: int, counter_port: list[int]):
        if shape[0] == "array":
            t = len(sizes)
            sizes.append(leaf_bytes(shape[1], shape[2])), producer.append(j)
            ports.append(counter_port[0]), control.append(False)
            counter_port[0] += 1
            return t
        return [build_value(part, j, counter_port) for part in shape[1]]

    def flat(value) -> list[int]:  # None: a library call's workspace, not a tensor
        if isinstance(value, int):
            return [value]
        return [t for v in value if v is not None for t in flat(v)]

    for ins in params + others:
        for operand in ins.operands:
            if operand not in values:
                known = any(i.name == operand for i in entry)
                _fail(ins.line, f"operand %{operand} of {ins.name!r} is "
                                + ("used before it is defined (the text is not in schedule "
                                   "order)" if known else "not defined in the ENTRY computation"))
        if ins.opcode == "tuple":
            values[ins.name] = [values[o] for o in ins.operands]
            continue
        if ins.opcode == "get-tuple-element":
            source = values[ins.operands[0]]
            index = int(ins.attrs.get("index", "-1"))
            if isinstance(source, int) or not 0 <= index < len(source):
                _fail(ins.line, f"get-tuple-element {ins.name!r} has a bad index {index}")
            if source[index] is None:
                _fail(ins.line, f"get-tuple-element {ins.name!r} reads the workspace of "
                                f"%{ins.operands[0]}, which only its library uses")
            values[ins.name] = source[index]
            continue
        j = len(ops)
        ops.append((ins, 0 if ins.opcode == "parameter" else counter.instr(ins)))
        for operand in ins.operands:
            for t in flat(values[operand]):
                edges[t, j] = None
        for pred in _names(ins.attrs.get("control-predecessors", "")):
            if pred not in values:
                _fail(ins.line, f"control predecessor %{pred} of {ins.name!r} is not defined "
                                "before it")
            p = next((producer[t] for t in flat(values[pred])), None)
            if p is None:
                continue
            t = len(sizes)
            sizes.append(0.0), producer.append(p), ports.append(-1), control.append(True)
            edges[t, j] = None
        if scratch_leaves(ins):  # the workspace: memory while the op runs, not a tensor
            *leaves_, workspace = ins.shape[1]
            temporary.append(leaf_bytes(workspace[1], workspace[2]))
            values[ins.name] = build_value(("tuple", leaves_), j, [0]) + [None]
        else:
            temporary.append(0.0)
            values[ins.name] = build_value(ins.shape, j, [0])
    if counter.fallback:
        listed = ", ".join(f"{k} ×{c}" for k, c in sorted(counter.fallback.items()))
        warnings.warn(f"flops of unknown opcodes estimated as one per output element: "
                      f"{listed}", FallbackWarning, stacklevel=2)
    op_flops = [float(f) for _, f in ops]
    pairs = np.array(list(edges), np.int64).reshape(-1, 2)
    return make_graph(
        compute_cost=[dev.compute_cost(f) for f in op_flops],
        temporary_memory=np.asarray(temporary, float),
        tensor_producer=np.asarray(producer, np.int64), tensor_size=np.asarray(sizes),
        tensor_is_control=np.asarray(control, bool), tensor_port=np.asarray(ports, np.int64),
        edge_tensor=pairs[:, 0], edge_consumer=pairs[:, 1],
        op_names=[i.name for i, _ in ops], op_types=[i.opcode for i, _ in ops],
        op_scopes=[scope_of(i) for i, _ in ops], op_flops=op_flops, name=name,
        is_input=[i.opcode == "parameter" for i, _ in ops])


BACKEND = "cpu"  # the platform import_jax compiles for at the HLO level unless told


def compile_for(fn, args: tuple, kwargs: dict, backend=BACKEND):
    """``jax.jit(fn).lower(*args, **kwargs).compile()`` for the first local device of
    ``backend`` (``"cpu"``, ``"gpu"``, ``"tpu"``, ...; ``None``: JAX's default backend) or for
    ``backend`` itself when it is a ``jax.Device`` (e.g. a GPU compiled for without one,
    :func:`gsched.harness.launches.target_device`), whatever devices the arguments live on:
    their arrays are lowered as shapes placed on that device. A failure is an
    :class:`ImporterError` naming the function and the problem."""
    import jax

    label = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    if not callable(fn):
        raise ImporterError(f"cannot import {label}: not a callable")
    try:
        device = backend if isinstance(backend, jax.Device) else \
            jax.local_devices(backend=backend)[0]
    except RuntimeError as err:
        raise ImporterError(f"cannot compile {label} for backend {backend!r}: "
                            f"{_first_line(err)}") from None
    try:
        with jax.default_device(device):
            return jax.jit(fn).lower(*shapes_on(args, device),
                                     **shapes_on(kwargs, device)).compile()
    except Exception as err:
        raise ImporterError(f"cannot compile {label} with jax.jit: {type(err).__name__}: "
                            f"{_first_line(err)}") from err


def count_flops(text: str) -> tuple[int, dict[str, int]]:
    """An HLO module's flops as :func:`import_hlo_text` counts them, summed over its ENTRY
    instructions, and the opcodes / custom calls that took the generic fallback (×count)."""
    module = parse_module(text)
    counter = _Flops(module, strict=False)
    return sum(counter.instr(i) for i in module.computations[module.entry]), counter.fallback


def compiled_alone(eqn) -> str | None:
    """The text of XLA's CPU module of one jaxpr equation alone, its literal operands kept as
    constants; None when it cannot be compiled alone (e.g. a collective outside its
    ``shard_map``)."""
    import jax

    literals = {i: v.val for i, v in enumerate(eqn.invars) if type(v).__name__ == "Literal"}
    specs = tuple(jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype,
                                       weak_type=bool(getattr(v.aval, "weak_type", False)))
                  for i, v in enumerate(eqn.invars) if i not in literals)

    def equation(*operands):
        rest = iter(operands)
        return eqn.primitive.bind(*(literals[i] if i in literals else next(rest)
                                    for i in range(len(eqn.invars))), **eqn.params)

    try:
        return compile_for(equation, specs, {}, "cpu").as_text()
    except Exception:  # noqa: BLE001 - any failure means: nothing to read
        return None


def lowered_flops(eqn) -> int | None:
    """The flops of XLA's lowering of one jaxpr equation alone (:func:`compiled_alone`),
    counted as this module counts them; None when it cannot be compiled alone or its module
    has opaque calls (the jaxpr level's count of a primitive it has no formula for)."""
    text = compiled_alone(eqn)
    if text is None:
        return None
    flops, fallback = count_flops(text)
    return None if fallback else flops


def lowered_trip_count(eqn) -> int | None:
    """The trip count XLA's loop analysis finds for a jaxpr ``while`` equation compiled alone
    (:func:`compiled_alone`: a bound or initial counter that is a literal of the program is
    known, one passed in is not); None when it finds none. A loop XLA removed ran at most
    once (its simplifier drops a loop of 0 trips and inlines one of 1): 0 when the module
    left counts no flops, else 1."""
    text = compiled_alone(eqn)
    if text is None:
        return None
    module = parse_module(text)
    loops = _outer_loops(module, module.entry)
    if not loops:
        flops, fallback = count_flops(text)
        return None if fallback else int(flops > 0)
    trip = _TRIP.search(loops[0].attrs.get("backend_config", "")) if len(loops) == 1 else None
    return int(trip.group(1)) if trip else None


def _outer_loops(module: Module, computation: str) -> list[Instr]:
    """The ``while`` instructions of ``computation`` and of the computations it calls (XLA's
    CPU compiler wraps code in ``call``s), not those inside another loop."""
    loops = []
    for ins in module.computations.get(computation, []):
        if ins.opcode == "while":
            loops.append(ins)
        elif ins.opcode in ("call", "fusion", "async-start"):
            for name in _names(ins.attrs.get("calls", "")) + _names(ins.attrs.get("to_apply", "")):
                loops += _outer_loops(module, name)
    return loops


def _first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else ""


def compiled_text(fn, *args, backend=BACKEND, **kwargs) -> str:
    """The text of :func:`compile_for`'s executable (XLA's scheduled module)."""
    return compile_for(fn, args, kwargs, backend).as_text()


def cost_analysis(fn, *args, backend=BACKEND, **kwargs) -> dict:
    """XLA's ``cost_analysis()`` totals of :func:`compile_for`'s executable (a dict; older JAX
    returned a list of one)."""
    result = compile_for(fn, args, kwargs, backend).cost_analysis()
    if isinstance(result, list):  # pragma: no cover - older JAX
        result = result[0] if result else {}
    return dict(result or {})
