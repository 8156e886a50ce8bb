"""The kernel launches of a compiled XLA program and the bytes each touches, from its text.

A compiled program's optimized HLO (``jax.stages.Compiled.as_text()``) lists what the device
runs: in each computation that runs on its own (the entry, a ``while`` loop's condition and
body, a ``conditional``'s branches, a ``call``), every instruction but the bookkeeping ones
(parameters, constants, tuples, bitcasts) is a launch, most of them fusions and custom calls
(a Pallas kernel is one). XLA's cost analysis is not available for a program compiled ahead of
time for a GPU without one, so this counts from the text what a launch reads and writes at
most: its operands' and result's bytes (a launch that reads a slice of an operand, or whose
result is written in place, touches less; a kernel's repeated reads of its own operands are
not counted). It is a measure of what the program materializes between launches, for
comparing variants of a program compiled by the same compiler, not a measured traffic.
:func:`target_device` is the device such a program is compiled for (``--compile-for``).
"""

from __future__ import annotations

import dataclasses
import re

import jax

DTYPE_BYTES = {"pred": 1, "s4": 1, "u4": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2,
               "bf16": 2, "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8,
               "c64": 8, "c128": 16}
BOOKKEEPING = frozenset({"parameter", "constant", "get-tuple-element", "tuple", "bitcast",
                         "after-all", "partition-id", "replica-id", "copy-done", "opt-barrier"})
_ARRAY = re.compile(r"\b(" + "|".join(sorted(DTYPE_BYTES, key=len, reverse=True))
                    + r")\[([\d,]*)\]")
_COMPUTATION = re.compile(r"^(ENTRY )?%([^\s(]+) \(.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%([^\s=]+) = (.*?) ([a-z][a-z0-9\-]*)\(([^)]*)\)(.*)$")
_OPERAND = re.compile(r"%([^\s,)}]+)")


@dataclasses.dataclass(frozen=True)
class Launch:
    """One launch: its instruction's ``name``, ``opcode`` and result ``shape`` (text),
    ``nbytes`` (its operands' and result's bytes), and where it runs: ``branch`` (the
    innermost ``conditional`` and the index of the branch holding it, None outside any) and
    ``loop`` (the innermost ``while`` whose condition or body holds it, None outside any:
    its launches repeat on every trip)."""

    name: str
    opcode: str
    shape: str
    nbytes: int
    branch: tuple[str, int] | None = None
    loop: str | None = None


def array_bytes(shape: str) -> int:
    """The bytes of every array in an HLO shape's text (a tuple's elements summed)."""
    total = 0
    for dtype, dims in _ARRAY.findall(shape):
        size = 1
        for dim in filter(None, dims.split(",")):
            size *= int(dim)
        total += size * DTYPE_BYTES[dtype]
    return total


def _computations(text: str) -> tuple[dict[str, list[str]], str]:
    """Each computation's instruction lines by name, and the entry's name."""
    computations: dict[str, list[str]] = {}
    entry, current = None, None
    for line in text.splitlines():
        header = _COMPUTATION.match(line)
        if header:
            current = header.group(2)
            computations[current] = []
            entry = current if header.group(1) else entry
        elif line.startswith("}"):
            current = None
        elif current is not None and line.strip():
            computations[current].append(line)
    if entry is None:
        raise ValueError("no ENTRY computation in the HLO text: pass a compiled program's "
                         "as_text()")
    return computations, entry


def _called(attributes: str, key: str) -> list[str]:
    """The computations an instruction's ``key=%name`` or ``key={%a, %b}`` attribute names."""
    found = re.search(key + r"=(\{[^}]*\}|%[^\s,]+)", attributes)
    return _OPERAND.findall(found.group(1)) if found else []


def launches(text: str) -> list[Launch]:
    """The launches of a compiled program's optimized HLO text, in program order (a loop's or
    branch's launches where the loop or conditional is; fusions' own computations are not
    walked: a fusion is one launch)."""
    computations, entry = _computations(text)

    def walk(name: str, branch, loop) -> list[Launch]:
        shapes: dict[str, str] = {}
        found: list[Launch] = []
        for line in computations[name]:
            parsed = _INSTRUCTION.match(re.sub(r", metadata=\{.*", "", line))
            if not parsed:
                continue
            instruction, shape, opcode, operands, attributes = parsed.groups()
            shapes[instruction] = shape
            if opcode in BOOKKEEPING:
                continue
            if opcode == "while":
                for called in _called(attributes, "condition") + _called(attributes, "body"):
                    found += walk(called, branch, instruction)
            elif opcode == "conditional":
                called = (_called(attributes, "branch_computations")
                          or _called(attributes, "true_computation")
                          + _called(attributes, "false_computation"))
                for index, computation in enumerate(called):
                    found += walk(computation, (instruction, index), loop)
            elif opcode == "call":
                for called in _called(attributes, "to_apply"):
                    found += walk(called, branch, loop)
            else:
                nbytes = array_bytes(shape) + sum(
                    array_bytes(shapes.get(operand, "")) for operand in
                    _OPERAND.findall(operands))
                found.append(Launch(instruction, opcode, shape, nbytes, branch, loop))
        return found

    return walk(entry, None, None)


def target_device(target: str):
    """The device ``--compile-for`` compiles for: this machine's CPU (``cpu``), or a GPU
    described by XLA's ``GpuTargetConfigProto`` text at the path ``target``
    (``eval/gpu_targets/``), compiled for by the CUDA plugin without the GPU."""
    if target == "cpu":
        return jax.devices("cpu")[0]
    try:
        config = open(target).read()
    except OSError as error:
        raise SystemExit(f"--compile-for: cannot read the GPU target {target!r}: {error}")
    try:
        from jax.experimental import topologies
        return topologies.get_topology_desc("target", "cuda", target_config=config,
                                            topology="1x1x1").devices[0]
    except Exception as error:  # the plugin missing, or the text not a target
        raise SystemExit(
            f"--compile-for {target}: no CUDA compiler without a GPU here ({error}). Install "
            f"JAX's CUDA plugin for this JAX beside it: pip install --no-deps --target DIR "
            f"jax-cuda13-plugin=={jax.__version__} jax-cuda13-pjrt=={jax.__version__}, then "
            f"run with PYTHONPATH=DIR JAX_PLATFORMS=cpu JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1")
