"""TensorFlow ``CostGraphDef`` in protobuf text format (SPEC §1.1), read and written without
TensorFlow or protobuf.

:func:`parse_text` is a small generic protobuf text-format parser; :func:`read_pbtxt` maps its
result onto a :class:`~gsched.core.graph.Graph`. Conventions beyond SPEC §1.1:

- absent integer fields are 0, as in proto3 (a node without ``id`` has id 0, an ``input_info``
  without ``preceding_port`` reads port 0); unknown fields are ignored;
- a non-standard ``op: "..."`` node field, if present, is the op type;
- consumer relations are numbered like tensors: every node's data inputs (node order, then
  ``input_info`` order), then every node's control inputs; repeats are dropped (an op listing
  the same ``control_input`` twice gets one control tensor);
- sizes and costs may be written as floats (``1.5``, ``nan``, ``inf``).
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from gsched.core.graph import Graph, make_graph
from gsched.formats._common import FormatError, as_number

_TOKEN = re.compile(r"""
    (?P<newline>\n)
  | (?P<space>[ \t\r\f\v]+)
  | (?P<comment>\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<badstring>["'])
  | (?P<number>(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fF]?)(?![\w.]))
  | (?P<ident>[A-Za-z_]\w*)
  | (?P<symbol>[{}<>\[\]:;,\-])
""", re.VERBOSE)
_ESCAPE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|u([0-9a-fA-F]{4})"
                     r"|U([0-9a-fA-F]{8})|(.))", re.DOTALL)
_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "a": "\a", "b": "\b", "f": "\f",
                   "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}
_QUOTE = {ord(c): f"\\{e}" for e, c in _SIMPLE_ESCAPES.items() if e not in "'?abfv"}
_QUOTE.update({c: f"\\{c:03o}" for c in [*range(32), 127] if c not in _QUOTE})
_FLOAT_WORDS = {"nan": float("nan"), "inf": float("inf"), "infinity": float("inf")}


@dataclasses.dataclass(frozen=True)
class Ident:
    """An unquoted identifier value (an enum such as ``DT_FLOAT``, or ``true``)."""

    text: str


@dataclasses.dataclass(frozen=True)
class _Token:
    kind: str  # "ident", "number", "string", "eof", or the symbol itself ("{", ":", ...)
    text: str
    line: int


def _tokenize(text: str) -> list[_Token]:
    tokens, pos, line = [], 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise FormatError(f"line {line}: syntax error: unexpected character {text[pos]!r}")
        kind, pos = m.lastgroup, m.end()
        if kind == "newline":
            line += 1
        elif kind == "badstring":
            raise FormatError(f"line {line}: syntax error: unterminated string")
        elif kind == "symbol":
            tokens.append(_Token(m.group(), m.group(), line))
        elif kind not in ("space", "comment"):
            tokens.append(_Token(kind, m.group(), line))
    tokens.append(_Token("eof", "", line))
    return tokens


def _unescape(body: str) -> str:
    out, pos = bytearray(), 0
    for m in _ESCAPE.finditer(body):
        out += body[pos:m.start()].encode()
        octal, hex2, u4, u8, simple = m.groups()
        if octal or hex2:
            out.append(int(octal, 8) & 0xFF if octal else int(hex2, 16))
        elif u4 or u8:
            out += chr(int(u4 or u8, 16)).encode("utf-8", "surrogatepass")
        else:
            out += _SIMPLE_ESCAPES.get(simple, "\\" + simple).encode()
        pos = m.end()
    out += body[pos:].encode()
    return out.decode("utf-8", "replace")


def _number(text: str) -> int | float:
    if text[:2] in ("0x", "0X"):
        return int(text, 16)
    if any(c in text for c in ".eEfF"):
        return float(text.rstrip("fF"))
    return int(text, 8) if len(text) > 1 and text[0] == "0" else int(text)


class _Parser:
    def __init__(self, text: str):
        self.tokens, self.pos = _tokenize(text), 0

    def next(self) -> _Token:
        self.pos += 1
        return self.tokens[self.pos - 1]

    def accept(self, kind: str) -> bool:
        if self.tokens[self.pos].kind == kind:
            self.pos += 1
            return True
        return False

    def fail(self, tok: _Token, expected: str):
        got = "end of file" if tok.kind == "eof" else repr(tok.text)
        raise FormatError(f"line {tok.line}: syntax error: expected {expected}, got {got}")

    def message(self, end: str) -> list:
        fields = []
        while (tok := self.next()).kind != end:
            if tok.kind != "ident":
                self.fail(tok, "a field name" if end == "eof" else f"a field name or {end!r}")
            fields.extend(self.field(tok))
        return fields

    def field(self, name: _Token) -> list:
        colon = self.accept(":")
        if self.accept("["):
            values = []
            if not self.accept("]"):
                values.append(self.value(name, colon))
                while self.accept(","):
                    values.append(self.value(name, colon))
                if not self.accept("]"):
                    self.fail(self.tokens[self.pos], "',' or ']'")
        else:
            values = [self.value(name, colon)]
        self.accept(";") or self.accept(",")
        return [(name.text, v, name.line) for v in values]

    def value(self, name: _Token, colon: bool):
        tok = self.next()
        if tok.kind in ("{", "<"):
            return self.message("}" if tok.kind == "{" else ">")
        if not colon:
            self.fail(tok, f"':' or '{{' after field {name.text!r}")
        if tok.kind == "string":
            parts = [tok]
            while self.tokens[self.pos].kind == "string":
                parts.append(self.next())
            return "".join(_unescape(t.text[1:-1]) for t in parts)
        sign = -1 if tok.kind == "-" else 1
        if sign < 0:
            tok = self.next()
        if tok.kind == "number":
            try:
                return sign * _number(tok.text)
            except ValueError:
                self.fail(tok, "a decimal, octal or hex number")
        if tok.kind == "ident" and tok.text.lower() in _FLOAT_WORDS:
            return sign * _FLOAT_WORDS[tok.text.lower()]
        if tok.kind == "ident" and sign > 0:
            return Ident(tok.text)
        self.fail(tok, f"a value for field {name.text!r}")


def parse_text(text: str) -> list[tuple[str, object, int]]:
    """Parses protobuf text format into a list of ``(field, value, line)``.

    A value is an ``int``, ``float``, ``str`` (quoted string), :class:`Ident`, or a nested
    message (again such a list). ``field: [a, b]`` gives one entry per element.
    """
    return _Parser(text).message("eof")


@dataclasses.dataclass
class _Node:
    line: int
    name: str = ""
    op: str = ""
    id: int = 0
    inputs: list = dataclasses.field(default_factory=list)  # (id, port, line)
    outputs: list = dataclasses.field(default_factory=list)  # sizes
    controls: list = dataclasses.field(default_factory=list)  # (id, line)
    temporary_memory: float = 0.0
    compute_cost: float = 0.0

    def __str__(self):
        return f"node {self.name!r} (id {self.id})"


def _check(value, types: tuple, what: str, field: str, line: int):
    if not isinstance(value, types) or isinstance(value, bool):
        raise FormatError(f"line {line}: field {field!r} must be {what}, got {value!r}")
    return value


def _submessage(value, field: str, line: int) -> dict:
    """The last value of each scalar field of a message (proto3: last one wins)."""
    return {f: (v, ln) for f, v, ln in _check(value, (list,), "a message", field, line)}


def _node(fields: list, line: int) -> _Node:
    node = _Node(line)
    for field, value, ln in fields:
        if field in ("name", "op"):
            setattr(node, field, _check(value, (str,), "a string", field, ln))
        elif field == "id":
            node.id = _check(value, (int,), "an integer", field, ln)
        elif field == "control_input":
            node.controls.append((_check(value, (int,), "an integer", field, ln), ln))
        elif field == "temporary_memory_size":
            node.temporary_memory = float(_check(value, (int, float), "a number", field, ln))
        elif field == "compute_cost":
            node.compute_cost = float(_check(value, (int, float), "a number", field, ln))
        elif field == "input_info":
            info = _submessage(value, field, ln)
            src, src_ln = info.get("preceding_node", (0, ln))
            port, port_ln = info.get("preceding_port", (0, ln))
            node.inputs.append((_check(src, (int,), "an integer", "preceding_node", src_ln),
                                _check(port, (int,), "an integer", "preceding_port", port_ln), ln))
        elif field == "output_info":
            size, size_ln = _submessage(value, field, ln).get("size", (0, ln))
            node.outputs.append(float(_check(size, (int, float), "a number", "size", size_ln)))
        elif field in ("input", "attr"):
            raise FormatError(f"line {ln}: field {field!r} belongs to a GraphDef NodeDef; "
                              "expected a CostGraphDef")
    return node


def read_pbtxt(text: str, name: str = "") -> Graph:
    """Reads a ``CostGraphDef`` in text format (SPEC §1.1) into a validated graph.

    Raises :class:`FormatError` (syntax error with line number, missing node id or port,
    duplicate id, no ``node``) or :class:`~gsched.core.graph.GraphError` (cycle, bad size or cost).
    """
    nodes = [_node(_check(v, (list,), "a message", f, ln), ln)
             for f, v, ln in parse_text(text) if f == "node"]
    if not nodes:
        raise FormatError("not a CostGraphDef: no 'node' entries")
    index: dict[int, int] = {}
    for j, node in enumerate(nodes):
        if node.id in index:
            raise FormatError(f"line {node.line}: duplicate node id {node.id}: {node} and "
                              f"{nodes[index[node.id]]} at line {nodes[index[node.id]].line}")
        index[node.id] = j
    first = np.cumsum([0] + [len(node.outputs) for node in nodes]).tolist()
    producer = [j for j, node in enumerate(nodes) for _ in node.outputs]
    port = [k for node in nodes for k in range(len(node.outputs))]
    size = [s for node in nodes for s in node.outputs]
    edges: dict[tuple[int, int], None] = {}  # (tensor, consumer), insertion-ordered
    for j, node in enumerate(nodes):
        for src, k, ln in node.inputs:
            p = _lookup(index, src, node, "input_info", ln)
            if not 0 <= k < len(nodes[p].outputs):
                raise FormatError(f"line {ln}: {node} reads port {k} of {nodes[p]}, which has "
                                  f"{len(nodes[p].outputs)} output(s)")
            edges[first[p] + k, j] = None
    for j, node in enumerate(nodes):
        for src in dict.fromkeys(_lookup(index, s, node, "control_input", ln)
                                 for s, ln in node.controls):
            edges[len(size), j] = None
            producer.append(src)
            port.append(-1)
            size.append(0.0)
    tensor, consumer = np.array(list(edges), np.int64).reshape(-1, 2).T
    return make_graph(
        compute_cost=[node.compute_cost for node in nodes],
        temporary_memory=[node.temporary_memory for node in nodes],
        tensor_producer=producer, tensor_size=size, tensor_port=port,
        tensor_is_control=[k < 0 for k in port],
        edge_tensor=tensor, edge_consumer=consumer,
        op_names=[node.name for node in nodes], op_types=[node.op for node in nodes],
        op_ids=[node.id for node in nodes], name=name)


def _lookup(index: dict, src: int, node: _Node, field: str, line: int) -> int:
    if src not in index:
        raise FormatError(f"line {line}: {node} has {field} referencing missing node id {src}")
    return index[src]


def _quote(s: str) -> str:
    return '"' + s.translate(_QUOTE) + '"'


def _fmt(x) -> str:
    return repr(as_number(x))


def write_pbtxt(graph: Graph) -> str:
    """``graph`` as ``CostGraphDef`` text; :func:`read_pbtxt` gives the same graph back, with
    consumer relations in the order :func:`read_pbtxt` numbers them.

    Raises :class:`FormatError` when CostGraphDef cannot number the tensors as ``graph`` does:
    data tensors must come first, by producer then port (ports ``0..k-1``); each control
    tensor needs exactly one consumer, control tensors ordered by consumer, no two between
    the same pair of ops; op ids must be unique; no program inputs, op scopes or flops
    (CostGraphDef has no such fields).
    """
    _check_writable(graph)
    n = graph.num_ops
    ids = graph.op_ids.tolist()
    producer, port = graph.tensor_producer.tolist(), graph.tensor_port.tolist()
    control = graph.tensor_is_control.tolist()
    outputs = [[] for _ in range(n)]
    for t in range(graph.num_tensors):
        if not control[t]:
            outputs[producer[t]].append(graph.tensor_size[t])
    inputs, controls = [[] for _ in range(n)], [[] for _ in range(n)]
    for t, c in zip(graph.edge_tensor.tolist(), graph.edge_consumer.tolist()):
        if not control[t]:
            inputs[c].append(f"  input_info {{ preceding_node: {ids[producer[t]]} "
                             f"preceding_port: {port[t]} }}")
    for t, c in sorted(zip(graph.edge_tensor.tolist(), graph.edge_consumer.tolist())):
        if control[t]:  # in tensor order, so that read_pbtxt numbers them the same
            controls[c].append(f"  control_input: {ids[producer[t]]}")
    lines = []
    for j in range(n):
        lines += ["node {", f"  name: {_quote(graph.op_names[j])}"]
        if graph.op_types[j]:
            lines.append(f"  op: {_quote(graph.op_types[j])}")
        lines.append(f"  id: {ids[j]}")
        lines += inputs[j]
        lines += [f"  output_info {{ size: {_fmt(s)} alias_input_port: -1 }}" for s in outputs[j]]
        lines.append(f"  temporary_memory_size: {_fmt(graph.temporary_memory[j])}")
        lines += controls[j]
        lines += [f"  compute_cost: {_fmt(graph.compute_cost[j])}", "}"]
    return "\n".join(lines) + "\n"


def _check_writable(graph: Graph) -> None:
    def fail(why: str):
        raise FormatError(f"cannot write graph {graph.name!r} as CostGraphDef: {why}")

    if np.unique(graph.op_ids).size != graph.num_ops:
        fail("op ids are not unique")
    if graph.has_inputs:
        fail("CostGraphDef has no program inputs (SPEC §1); use node-link JSON or .npz")
    if any(graph.op_scopes) or graph.op_flops.any():
        fail("CostGraphDef has no op scopes or flops; use node-link JSON or .npz")
    control = graph.tensor_is_control
    n_data = int(np.count_nonzero(~control))
    if control[:n_data].any():
        fail("control tensors must come after all data tensors")
    producer, port = graph.tensor_producer[:n_data], graph.tensor_port[:n_data]
    run_start = np.searchsorted(producer, producer)
    if (np.diff(producer) < 0).any() or not np.array_equal(port, np.arange(n_data) - run_start):
        fail("data tensors must be ordered by producer, then port, with ports 0..k-1")
    is_ctrl_edge = control[graph.edge_tensor]
    ctrl_tensor = graph.edge_tensor[is_ctrl_edge]
    if np.bincount(ctrl_tensor, minlength=graph.num_tensors)[n_data:].tolist() != [1] * (
            graph.num_tensors - n_data):
        fail("every control tensor needs exactly one consumer")
    consumer = np.empty(graph.num_tensors, np.int64)
    consumer[ctrl_tensor] = graph.edge_consumer[is_ctrl_edge]
    consumer = consumer[n_data:]
    if (np.diff(consumer) < 0).any():
        fail("control tensors must be ordered by consumer op")
    pairs = graph.tensor_producer[n_data:] * graph.num_ops + consumer
    if np.unique(pairs).size != pairs.size:
        fail("two control tensors join the same pair of ops")
