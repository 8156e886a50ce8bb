"""networkx node-link JSON (SPEC §1.2), read and written without networkx.

Three flavours, told apart by the node keys: Checkmate (``id``, ``cost_ram``, ``cost_cpu``),
layered (``name``, ``out_cost``, ``param_cost``, ``duration``) and gsched (``outputs``, or
``"format": "gsched"`` in the top-level ``graph`` object). Links may sit under ``links`` or
(newer networkx) ``edges`` and use ``source``/``target`` or ``"0"``/``"1"``. In the first
two, op ids are the node keys when those are all integers, else ``0..N-1``; a node's optional
``op`` is its type and ``"input": true`` marks a program input (SPEC §1).

**The gsched flavour** holds any :class:`~gsched.core.graph.Graph` exactly (imported programs
have ops with several output tensors, ops with none, and control tensors, which the other two
cannot express). It is still plain networkx node-link data (a directed multigraph)::

    {"directed": true, "multigraph": true,
     "graph": {"format": "gsched", "version": 1, "name": "..."},
     "nodes": [{"id": 7,              # op id (an integer, unique)
                "name": "...", "op": "dot_general", "scope": "layer1/attn",
                "flops": 1024, "input": false,
                "compute_cost": 1.2e-9, "temporary_memory": 0,
                "outputs": [64, 16],  # sizes in bytes of its data tensors, by port 0, 1, ...
                "controls": 1}, ...], # number of size-0 control tensors it produces (if any)
     "links": [{"source": 7, "target": 9, "port": 1}, ...]}

A link reads the output ``port`` of ``source``; ``"port": -1 - k`` reads the source's ``k``-th
control tensor. Tensors are numbered node by node, data ports first, then its control tensors
(as ``make_graph``'s default ports assume); a graph whose tensors are numbered otherwise gets a
top-level ``"tensor_order"``: ``[node id, port]`` per tensor, in tensor order. Links are
consumer relations in the graph's order. ``name``, ``op``, ``scope``, ``flops``, ``input``,
``temporary_memory``, ``controls`` and ``outputs`` are optional (defaults ``"op{j}"``, ``""``,
``""``, 0, false, 0, 0, none); ``id`` and ``compute_cost`` are required. Writing needs each
op's data ports to be exactly ``0..k-1`` (every reader and importer numbers them so).
"""

from __future__ import annotations

import json

import numpy as np

from gsched.core.graph import Graph, make_graph
from gsched.formats._common import FormatError, as_number

# flavour -> (node key, output size, temporary memory or None, compute cost)
_FLAVOURS = {
    "Checkmate": ("id", "cost_ram", None, "cost_cpu"),
    "layered": ("name", "out_cost", "param_cost", "duration"),
}


def _flavour(node) -> tuple:
    for fields in _FLAVOURS.values():
        if isinstance(node, dict) and fields[1] in node:
            return fields
    keys = sorted(node) if isinstance(node, dict) else type(node).__name__
    raise FormatError(f"unknown node-link flavour: node 0 is {keys}; expected Checkmate "
                      "('id', 'cost_ram', 'cost_cpu') or layered ('name', 'out_cost', "
                      "'param_cost', 'duration') keys")


def _field(node, i: int, key: str):
    if not isinstance(node, dict) or key not in node:
        raise FormatError(f"node {i} has no {key!r}")
    return node[key]


def _number(node, i: int, key: str) -> float:
    value = _field(node, i, key)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise FormatError(f"node {i} has non-numeric {key!r}: {value!r}")
    return float(value)


def _endpoints(link, i: int) -> tuple:
    for a, b in (("source", "target"), ("0", "1")):
        if isinstance(link, dict) and a in link and b in link:
            return link[a], link[b]
    raise FormatError(f"link {i} has no 'source'/'target' (or '0'/'1') keys")


def read_nodelink(data: str | dict, name: str = "") -> Graph:
    """Reads node-link JSON (text or an already decoded dict) into a validated graph.

    Raises :class:`FormatError` (bad JSON, unknown flavour, missing field, link to an unknown
    node, a non-boolean ``input``) or :class:`~gsched.core.graph.GraphError` (cycle, bad size
    or cost, a program input with dependencies). A node with ``"input": true`` is a program
    input (SPEC §1).
    """
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as err:
            raise FormatError(f"invalid JSON: {err}") from None
    nodes = data.get("nodes") if isinstance(data, dict) else None
    links = data.get("links", data.get("edges")) if isinstance(data, dict) else None
    if not isinstance(nodes, list) or not isinstance(links, list):
        raise FormatError("not a node-link graph: needs a 'nodes' list and a 'links' "
                          "(or 'edges') list")
    if _is_gsched(data):
        return _read_gsched(data, nodes, links, name)
    if not nodes:
        raise FormatError("node-link graph has no nodes")
    key, size, temp, cost = _flavour(nodes[0])
    keys = [_field(node, i, key) for i, node in enumerate(nodes)]
    index = {}
    for i, k in enumerate(keys):
        if type(k) not in (int, str):
            raise FormatError(f"node {i} has an invalid {key!r}: {k!r}")
        if k in index:
            raise FormatError(f"nodes {index[k]} and {i} have the same {key!r}: {k!r}")
        index[k] = i
    pairs: dict[tuple[int, int], None] = {}
    for i, link in enumerate(links):
        ends = _endpoints(link, i)
        for end in ends:
            if type(end) not in (int, str) or end not in index:
                raise FormatError(f"link {i} refers to unknown node {end!r}")
        pairs[index[ends[0]], index[ends[1]]] = None
    src, dst = np.array(list(pairs), np.int64).reshape(-1, 2).T
    int_keys = all(type(k) is int and -2**63 <= k < 2**63 for k in keys)
    return make_graph(
        compute_cost=[_number(node, i, cost) for i, node in enumerate(nodes)],
        temporary_memory=[_number(node, i, temp) if temp else 0.0
                          for i, node in enumerate(nodes)],
        tensor_producer=np.arange(len(nodes)),
        tensor_size=[_number(node, i, size) for i, node in enumerate(nodes)],
        edge_tensor=src, edge_consumer=dst,
        op_names=[str(node.get("name", k)) for node, k in zip(nodes, keys)],
        op_types=[str(node.get("op", "")) for node in nodes],
        op_ids=keys if int_keys else None, name=name,
        is_input=[_flag(node, i, "input") for i, node in enumerate(nodes)])


def _flag(node, i: int, key: str) -> bool:
    value = node.get(key, False)
    if not isinstance(value, bool):
        raise FormatError(f"node {i} has non-boolean {key!r}: {value!r}")
    return value


def checkmate_problem(graph: Graph) -> str | None:
    """Why the Checkmate flavour cannot hold ``graph`` exactly (None when it can): it needs
    tensor ``k`` to be the only output of op ``k``, no control tensors, no temporary memory,
    no scopes and no flops."""
    n = graph.num_ops
    if graph.tensor_is_control.any() or not np.array_equal(graph.tensor_producer, np.arange(n)):
        return "needs tensor k to be the only output of op k and no control tensors"
    if graph.temporary_memory.any():
        return "the Checkmate flavour has no temporary memory"
    if graph.tensor_port.any():
        return "every tensor must be its producer's port 0"
    if any(graph.op_scopes) or graph.op_flops.any():
        return "the Checkmate flavour has no scopes or flops"
    return None


def write_nodelink(graph: Graph, flavour: str = "checkmate") -> str:
    """``graph`` as node-link JSON; :func:`read_nodelink` gives it back exactly.

    ``flavour``: ``"checkmate"`` (raises :class:`FormatError` unless tensor ``k`` is the only
    output of op ``k`` for every op, there are no control tensors, no temporary memory, and
    the op ids are unique; scopes and flops are not written), ``"gsched"`` (any graph, see the
    module docstring), or ``"auto"`` (Checkmate when it holds the graph exactly, else gsched).
    """
    if flavour not in ("checkmate", "gsched", "auto"):
        raise ValueError(f"unknown node-link flavour {flavour!r} (checkmate, gsched or auto)")
    if flavour == "gsched" or (flavour == "auto" and checkmate_problem(graph)):
        return _write_gsched(graph)
    n = graph.num_ops
    if graph.tensor_is_control.any() or not np.array_equal(graph.tensor_producer, np.arange(n)):
        why = "needs tensor k to be the only output of op k and no control tensors"
    elif graph.temporary_memory.any():
        why = "the Checkmate flavour has no temporary memory"
    elif np.unique(graph.op_ids).size != n:
        why = "op ids are not unique"
    else:
        why = None
    if why:
        raise FormatError(f"cannot write graph {graph.name!r} as node-link JSON: {why}")
    ids = graph.op_ids.tolist()
    nodes = [{"id": ids[j], "name": graph.op_names[j],
              "cost_ram": as_number(graph.tensor_size[j]),
              "cost_cpu": as_number(graph.compute_cost[j]),
              **({"op": graph.op_types[j]} if graph.op_types[j] else {}),
              **({"input": True} if graph.is_input[j] else {})} for j in range(n)]
    links = [{"source": ids[s], "target": ids[t]}
             for s, t in zip(graph.edge_tensor.tolist(), graph.edge_consumer.tolist())]
    return json.dumps({"directed": True, "multigraph": False, "graph": {"name": graph.name},
                       "nodes": nodes, "links": links})


# --- the gsched flavour ---------------------------------------------------------------------

GSCHED_VERSION = 1
_GSCHED_KEYS = {"id", "name", "op", "scope", "flops", "input", "compute_cost",
                "temporary_memory", "outputs", "controls"}


def _is_gsched(data: dict) -> bool:
    meta = data.get("graph")
    if isinstance(meta, dict) and meta.get("format") == "gsched":
        return True
    nodes = data["nodes"]
    return bool(nodes) and isinstance(nodes[0], dict) and "outputs" in nodes[0]


def _optional_number(node: dict, i: int, key: str) -> float:
    return _number(node, i, key) if key in node else 0.0


def _optional_string(node: dict, i: int, key: str, default: str) -> str:
    value = node.get(key, default)
    if not isinstance(value, str):
        raise FormatError(f"node {i} has non-string {key!r}: {value!r}")
    return value


def _integer(value, what: str) -> int:
    if type(value) is not int:
        raise FormatError(f"{what} must be an integer, got {value!r}")
    return value


def _read_gsched(data: dict, nodes: list, links: list, name: str) -> Graph:
    meta = data.get("graph") if isinstance(data.get("graph"), dict) else {}
    version = meta.get("version", GSCHED_VERSION)
    if version != GSCHED_VERSION:
        raise FormatError(f"gsched node-link version {version!r} is not supported (this "
                          f"gsched reads version {GSCHED_VERSION})")
    ids, index = [], {}
    sizes: list[float] = []
    producer: list[int] = []
    control: list[bool] = []
    port_of: list[int] = []
    tensor_of: dict[tuple[int, int], int] = {}  # (op, port) -> tensor (port -1-k: control k)
    for i, node in enumerate(nodes):
        if not isinstance(node, dict):
            raise FormatError(f"node {i} is not an object: {node!r}")
        key = _integer(_field(node, i, "id"), f"node {i}'s 'id'")
        if key in index:
            raise FormatError(f"nodes {index[key]} and {i} have the same 'id': {key!r}")
        index[key] = i
        ids.append(key)
        outputs = node.get("outputs", [])
        if not isinstance(outputs, list):
            raise FormatError(f"node {i} has non-list 'outputs': {outputs!r}")
        for p, size in enumerate(outputs):
            if not isinstance(size, (int, float)) or isinstance(size, bool):
                raise FormatError(f"node {i} has a non-numeric output size: {size!r}")
            tensor_of[i, p] = len(sizes)
            sizes.append(float(size)), producer.append(i), control.append(False)
            port_of.append(p)
        controls = node.get("controls", 0)
        if type(controls) is not int or controls < 0:
            raise FormatError(f"node {i} has invalid 'controls': {controls!r}")
        for k in range(controls):
            tensor_of[i, -1 - k] = len(sizes)
            sizes.append(0.0), producer.append(i), control.append(True), port_of.append(-1)
    order = np.arange(len(sizes))
    if "tensor_order" in data:
        order = _tensor_order(data["tensor_order"], index, tensor_of)
    rank = np.empty(len(sizes), np.int64)  # canonical tensor -> its index in the file's order
    rank[order] = np.arange(len(sizes))
    pairs: dict[tuple[int, int], None] = {}
    for i, link in enumerate(links):
        src, dst = _endpoints(link, i)
        for end in (src, dst):
            if type(end) is not int or end not in index:
                raise FormatError(f"link {i} refers to unknown node {end!r}")
        port = _integer(link.get("port", 0) if isinstance(link, dict) else None,
                        f"link {i}'s 'port'")
        t = tensor_of.get((index[src], port))
        if t is None:
            raise FormatError(f"link {i} reads port {port} of node {src!r}, which has no "
                              "such output")
        pairs[int(rank[t]), index[dst]] = None
    tensors, consumers = np.array(list(pairs), np.int64).reshape(-1, 2).T
    n = len(nodes)
    return make_graph(
        compute_cost=[_number(node, i, "compute_cost") for i, node in enumerate(nodes)],
        temporary_memory=[_optional_number(node, i, "temporary_memory")
                          for i, node in enumerate(nodes)],
        tensor_producer=np.asarray(producer, np.int64).reshape(-1)[order],
        tensor_size=np.asarray(sizes, np.float64).reshape(-1)[order],
        tensor_is_control=np.asarray(control, bool).reshape(-1)[order],
        tensor_port=np.asarray(port_of, np.int64).reshape(-1)[order],
        edge_tensor=tensors, edge_consumer=consumers,
        op_names=[_optional_string(node, i, "name", f"op{i}") for i, node in enumerate(nodes)],
        op_types=[_optional_string(node, i, "op", "") for i, node in enumerate(nodes)],
        op_scopes=[_optional_string(node, i, "scope", "") for i, node in enumerate(nodes)],
        op_flops=[_optional_number(node, i, "flops") for i, node in enumerate(nodes)],
        op_ids=np.asarray(ids, np.int64).reshape(n),
        name=name or str(meta.get("name", "")),
        is_input=[_flag(node, i, "input") for i, node in enumerate(nodes)])


def _tensor_order(entries, index: dict, tensor_of: dict) -> np.ndarray:
    """The canonical tensor numbers in the file's ``tensor_order``, which must list each
    tensor exactly once."""
    if not isinstance(entries, list) or len(entries) != len(tensor_of):
        raise FormatError(f"'tensor_order' must list each of the {len(tensor_of)} tensors once")
    order = []
    for i, entry in enumerate(entries):
        if (not isinstance(entry, list) or len(entry) != 2
                or any(type(x) is not int for x in entry) or entry[0] not in index
                or (index[entry[0]], entry[1]) not in tensor_of):
            raise FormatError(f"'tensor_order' entry {i} is not a [node id, port] of an "
                              f"existing tensor: {entry!r}")
        order.append(tensor_of[index[entry[0]], entry[1]])
    if len(set(order)) != len(order):
        raise FormatError("'tensor_order' lists a tensor twice")
    return np.asarray(order, np.int64)


def _write_gsched(graph: Graph) -> str:
    n, ids = graph.num_ops, graph.op_ids.tolist()
    by_port: list[dict[int, float]] = [{} for _ in range(n)]
    controls = [0] * n
    key = []  # (op, port) of each tensor; port -1-k is the op's k-th control tensor
    for t, (p, c, port) in enumerate(zip(graph.tensor_producer.tolist(),
                                         graph.tensor_is_control.tolist(),
                                         graph.tensor_port.tolist())):
        if c:
            key.append((p, -1 - controls[p]))
            controls[p] += 1
        else:
            key.append((p, port))
            by_port[p][port] = float(graph.tensor_size[t])
    data_count = np.bincount(graph.tensor_producer[~graph.tensor_is_control], minlength=n)
    for j, sizes in enumerate(by_port):
        if sorted(sizes) != list(range(len(sizes))) or len(sizes) != data_count[j]:
            raise FormatError(f"cannot write graph {graph.name!r} as gsched node-link JSON: "
                              f"the data output ports of op {j} are not exactly 0..k-1")
    outputs = [[sizes[k] for k in range(len(sizes))] for sizes in by_port]
    canonical = sorted(range(len(key)), key=lambda t: (key[t][0], key[t][1] < 0,
                                                       abs(key[t][1])))
    nodes = []
    for j in range(n):
        node = {"id": ids[j], "name": graph.op_names[j]}
        if graph.op_types[j]:
            node["op"] = graph.op_types[j]
        if graph.op_scopes[j]:
            node["scope"] = graph.op_scopes[j]
        if graph.op_flops[j]:
            node["flops"] = as_number(graph.op_flops[j])
        if graph.is_input[j]:
            node["input"] = True
        node["compute_cost"] = as_number(graph.compute_cost[j])
        if graph.temporary_memory[j]:
            node["temporary_memory"] = as_number(graph.temporary_memory[j])
        node["outputs"] = [as_number(x) for x in outputs[j]]
        if controls[j]:
            node["controls"] = controls[j]
        nodes.append(node)
    links = [{"source": ids[key[t][0]], "target": ids[c], "port": key[t][1]}
             for t, c in zip(graph.edge_tensor.tolist(), graph.edge_consumer.tolist())]
    out = {"directed": True, "multigraph": True,
           "graph": {"format": "gsched", "version": GSCHED_VERSION, "name": graph.name},
           "nodes": nodes, "links": links}
    if canonical != list(range(len(key))):
        out["tensor_order"] = [[ids[p], port] for p, port in key]
    return json.dumps(out, allow_nan=False)
