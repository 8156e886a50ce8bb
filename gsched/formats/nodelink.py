"""networkx node-link JSON (SPEC §1.2), read and written without networkx.

Two flavours, told apart by the node keys: Checkmate (``id``, ``cost_ram``, ``cost_cpu``) and
layered (``name``, ``out_cost``, ``param_cost``, ``duration``). Links may sit under ``links``
or (newer networkx) ``edges`` and use ``source``/``target`` or ``"0"``/``"1"``. Op ids are the
node keys when those are all integers, else ``0..N-1``; a node's optional ``op`` is its type.
"""

from __future__ import annotations

import json

import numpy as np

from gsched.formats._common import FormatError, as_number
from gsched.graph import Graph, make_graph

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
    node) or :class:`~gsched.graph.GraphError` (cycle, bad size or cost).
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
        op_ids=keys if int_keys else None, name=name)


def write_nodelink(graph: Graph) -> str:
    """``graph`` as Checkmate-flavour node-link JSON; :func:`read_nodelink` gives it back.

    Raises :class:`FormatError` unless tensor ``k`` is the only output of op ``k`` for every
    op, there are no control tensors, no temporary memory, and the op ids are unique.
    """
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
              **({"op": graph.op_types[j]} if graph.op_types[j] else {})} for j in range(n)]
    links = [{"source": ids[s], "target": ids[t]}
             for s, t in zip(graph.edge_tensor.tolist(), graph.edge_consumer.tolist())]
    return json.dumps({"directed": True, "multigraph": False, "graph": {"name": graph.name},
                       "nodes": nodes, "links": links})
