"""Graph file formats: CostGraphDef text, node-link JSON, native .npz (SPEC §1.1, §1.2)."""

import json
from pathlib import Path

import numpy as np
import pytest

from gsched.core.graph import GraphError, make_graph
from gsched.formats import (
    FormatError,
    load_dataset,
    load_graph,
    load_graphs,
    parse_text,
    read_nodelink,
    read_pbtxt,
    save_dataset,
    save_graph,
    write_nodelink,
    write_pbtxt,
)
from gsched.formats.pbtxt import Ident
from tests.graphs import SHARED

MOCCASIN = sorted((SHARED / "benchmarks" / "moccasin").glob("*.json"))
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="shared/ folder absent")


def random_graph(rng, n, name=""):
    """A random DAG in CostGraphDef order (see write_pbtxt), op ids neither 0.. nor sorted."""
    rank = rng.permutation(n)  # topological position of each op
    n_out = rng.integers(0, 3, n)
    producer = np.repeat(np.arange(n), n_out)
    edges = []  # (consumer, tensor)
    for t, p in enumerate(producer):
        later = np.flatnonzero(rank > rank[p])
        edges += [(c, t) for c in rng.choice(later, min(len(later), rng.integers(0, 3)),
                                             replace=False)]
    edges.sort(key=lambda ct: ct[0])
    pairs = {(a, b) if rank[a] < rank[b] else (b, a)
             for a, b in rng.integers(0, n, (n // 2, 2)) if a != b}
    controls = sorted(pairs, key=lambda ab: ab[1])
    t_data = len(producer)
    edges += [(b, t_data + i) for i, (_, b) in enumerate(controls)]
    sizes = rng.choice([0.0, 1.0, 0.1, 3e10, 1e300, 2.0**60, 7.25], t_data)
    consumer, tensor = np.array(edges, np.int64).reshape(-1, 2).T
    return make_graph(
        compute_cost=rng.choice([0.0, 2.0, 1 / 3, 1e-300], n),
        temporary_memory=rng.integers(0, 10, n).astype(float),
        tensor_producer=np.concatenate([producer, [a for a, _ in controls]]).astype(np.int64),
        tensor_size=np.concatenate([sizes, np.zeros(len(controls))]),
        tensor_is_control=np.arange(t_data + len(controls)) >= t_data,
        edge_tensor=tensor, edge_consumer=consumer,
        op_names=[f'op "{j}"\\\n\té' for j in range(n)],
        op_types=[("MatMul", "")[j % 2] for j in range(n)],
        op_ids=rng.choice(10 * n + 10, n, replace=False) - 5, name=name)


# ---------------------------------------------------------------- CostGraphDef text

@needs_shared
def test_diamond_is_the_spec_example():
    g = load_graph(SHARED / "examples" / "diamond.pbtxt")
    assert g.name == "diamond" and g.op_names == ("a", "b", "c", "d")
    np.testing.assert_array_equal(g.tensor_producer, [0, 1, 2, 3])
    np.testing.assert_array_equal(g.tensor_size, [4, 2, 3, 1])
    assert sorted(zip(g.edge_tensor.tolist(), g.edge_consumer.tolist())) == [
        (0, 1), (0, 2), (1, 3), (2, 3)]
    np.testing.assert_array_equal(g.temporary_memory, [0, 0, 5, 0])
    np.testing.assert_array_equal(g.compute_cost, [2, 3, 4, 1])
    assert not g.tensor_is_control.any()


HAND_WRITTEN = """
# A hand-written CostGraphDef: multi-output ops, repeated reads, control inputs.
node {
  name: "x"  # the first node; its id 0 is omitted as proto3 does
  device: "/job:localhost/replica:0/task:0/device:CPU:0"
  output_info { size: 8 alias_input_port: -1 shape { dim { size: 2 } } dtype: DT_FLOAT }
  output_info: { size: 16; alias_input_port: 0 }
  compute_cost: 1 compute_time: 1 memory_time: 0 is_final: true
}
node <
  name: 'y' id: 7 op: "Split"
  input_info < preceding_node: 0 preceding_port: 1 >
  input_info { preceding_node: 0 preceding_port: 1 }  # same tensor again: one consumer
  input_info { preceding_node: 0 }
  output_info { size: 1.5 } output_info { size: 2 } output_info { size: 3 }
  temporary_memory_size: 100 persistent_memory_size: 4 inaccurate: false
  compute_cost: 2.5
>
node {
  name: "z" id: 3
  input_info { preceding_node: 7 preceding_port: 2 }
  control_input: [0, 7]
  control_input: 0  # a repeated control input: still one control tensor
  compute_cost: 0x10
}
cost { cost: 1.0 dimension: "ignored" }
"""


def test_pbtxt_hand_written_graph():
    g = read_pbtxt(HAND_WRITTEN, name="hand")
    assert g.op_names == ("x", "y", "z") and g.op_types == ("", "Split", "")
    np.testing.assert_array_equal(g.op_ids, [0, 7, 3])
    # data tensors in node, then port order; then control tensors in node, then listed order
    np.testing.assert_array_equal(g.tensor_producer, [0, 0, 1, 1, 1, 0, 1])
    np.testing.assert_array_equal(g.tensor_port, [0, 1, 0, 1, 2, -1, -1])
    np.testing.assert_array_equal(g.tensor_size, [8, 16, 1.5, 2, 3, 0, 0])
    np.testing.assert_array_equal(g.tensor_is_control, [0, 0, 0, 0, 0, 1, 1])
    np.testing.assert_array_equal(g.edge_tensor, [1, 0, 4, 5, 6])
    np.testing.assert_array_equal(g.edge_consumer, [1, 1, 2, 2, 2])
    np.testing.assert_array_equal(g.temporary_memory, [0, 100, 0])
    np.testing.assert_array_equal(g.compute_cost, [1, 2.5, 16])
    text = write_pbtxt(g)
    assert read_pbtxt(text, name="hand") == g
    assert write_pbtxt(read_pbtxt(text, name="hand")) == text


def test_pbtxt_round_trip_random_graphs(tmp_path):
    rng = np.random.default_rng(0)
    for i in range(30):
        g = random_graph(rng, int(rng.integers(1, 25)), name=f"g{i}")
        assert read_pbtxt(write_pbtxt(g), name=g.name) == g
        save_graph(g, tmp_path / f"g{i}.pbtxt")
        assert load_graph(tmp_path / f"g{i}.pbtxt") == g


def test_write_pbtxt_rejects_what_costgraphdef_cannot_number():
    base = dict(compute_cost=[1, 1], temporary_memory=[0, 0], edge_tensor=[1],
                edge_consumer=[1])
    unordered = make_graph(tensor_producer=[1, 0], tensor_size=[1, 1], **base)
    with pytest.raises(FormatError, match="ordered by producer"):
        write_pbtxt(unordered)
    dangling = make_graph(tensor_producer=[0, 0], tensor_size=[1, 0],
                          tensor_is_control=[False, True], **{**base, "edge_tensor": [0]})
    with pytest.raises(FormatError, match="exactly one consumer"):
        write_pbtxt(dangling)


def test_parse_text_generic():
    fields = parse_text('a: "x\\n\\101\\"" \'y\'; b <c: -inf d: [1, 2.5f, 0x10]>, '
                        "e: FOO f {} g: -3 h: nan")
    assert fields[0] == ("a", 'x\nA"y', 1)
    assert fields[1] == ("b", [("c", -np.inf, 1), ("d", 1, 1), ("d", 2.5, 1), ("d", 16, 1)], 1)
    assert fields[2:5] == [("e", Ident("FOO"), 1), ("f", [], 1), ("g", -3, 1)]
    assert np.isnan(fields[5][1])


@pytest.mark.parametrize("text, message", [
    ('node { name: "a" id: 0 input_info { preceding_node: 1 } output_info { size: 1 } }\n'
     'node { name: "b" id: 1 input_info { preceding_node: 0 } output_info { size: 1 } }',
     r"cycle through op \d \('[ab]'\)"),
    ('node { name: "a" id: 0 output_info { size: 1 } }\n'
     'node { name: "b" id: 1 input_info { preceding_node: 9 } }',
     r"line 2: node 'b' \(id 1\) has input_info referencing missing node id 9"),
    ('node { name: "a" id: 0 output_info { size: 1 } }\n'
     'node { name: "b" id: 1 control_input: 4 }',
     "node 'b'.*control_input referencing missing node id 4"),
    ('node { name: "a" id: 0 output_info { size: 1 } }\n'
     'node { name: "b" id: 1 input_info { preceding_node: 0 preceding_port: 3 } }',
     r"node 'b' \(id 1\) reads port 3 of node 'a' \(id 0\), which has 1 output"),
    ('node { name: "a" id: 0 output_info { size: -3 } }', r"op 0 \('a'\).*invalid size -3"),
    ('node { name: "a" id: 0 compute_cost: nan }', r"op 0 \('a'\).*invalid compute_cost nan"),
    ('node { name: "a" id: 5 }\nnode { name: "b" id: 5 }', "duplicate node id 5"),
    ('node { name: "a"\n id: 0\n output_info { size: 1 }\n', "line 4: syntax error.*end of file"),
    ('node { name: "a" id: 1.5 }', "'id' must be an integer"),
    ('node { name "a" }', "line 1: syntax error: expected ':' or '{' after field 'name'"),
    ('node { name: "a }', "line 1: syntax error: unterminated string"),
    ("versions { producer: 1 }", "not a CostGraphDef: no 'node'"),
    ('node { name: "a" op: "Add" input: "b:0" }', "GraphDef"),
])
def test_pbtxt_errors_name_the_problem(tmp_path, text, message):
    path = tmp_path / "bad.pbtxt"
    path.write_text(text)
    with pytest.raises(FormatError, match=message) as info:
        load_graph(path)
    assert str(path) in str(info.value)
    with pytest.raises((FormatError, GraphError), match=message):
        read_pbtxt(text)


# ---------------------------------------------------------------- node-link JSON

@needs_shared
@pytest.mark.parametrize("path", MOCCASIN, ids=lambda p: p.name)
def test_moccasin_graphs_load(path):
    data = json.loads(path.read_text())
    layered = "out_cost" in data["nodes"][0]
    key, size, cost = ("name", "out_cost", "duration") if layered else ("id", "cost_ram",
                                                                         "cost_cpu")
    ends = ("0", "1") if layered else ("source", "target")
    pairs = {(link[ends[0]], link[ends[1]]) for link in data["links"]}
    g = load_graph(path)
    assert g.name == path.stem
    assert (g.num_ops, g.num_tensors, g.num_edges) == (len(data["nodes"]),) * 2 + (len(pairs),)
    np.testing.assert_array_equal(g.tensor_size, [node[size] for node in data["nodes"]])
    np.testing.assert_array_equal(g.compute_cost, [node[cost] for node in data["nodes"]])
    np.testing.assert_array_equal(
        g.temporary_memory, [node["param_cost"] if layered else 0 for node in data["nodes"]])
    keys = [node[key] for node in data["nodes"]]
    assert {(keys[p], keys[c]) for p, c in zip(g.edge_tensor, g.edge_consumer)} == pairs
    assert read_nodelink(write_nodelink(g), name=g.name) == g


def test_nodelink_flavours_and_duplicates():
    layered = {"nodes": [{"name": 10, "out_cost": 5, "param_cost": 7, "duration": 2},
                         {"name": 20, "out_cost": 1, "param_cost": 0, "duration": 3}],
               "edges": [{"0": 10, "1": 20}, {"0": 10, "1": 20}]}
    g = read_nodelink(layered)
    assert g.op_names == ("10", "20") and g.op_ids.tolist() == [10, 20]
    assert g.temporary_memory.tolist() == [7, 0] and g.compute_cost.tolist() == [2, 3]
    assert g.edge_tensor.tolist() == [0] and g.edge_consumer.tolist() == [1]
    checkmate = {"nodes": [{"id": "a", "cost_ram": 1, "cost_cpu": 0},
                           {"id": "b", "name": "B", "cost_ram": 2, "cost_cpu": 1}],
                 "links": [{"source": "a", "target": "b"}]}
    g = read_nodelink(json.dumps(checkmate))
    assert g.op_names == ("a", "B") and g.op_ids.tolist() == [0, 1]


@pytest.mark.parametrize("data, message", [
    ({"nodes": [{"id": 0, "cost_ram": 1, "cost_cpu": 1}], "links": [{"source": 0,
                                                                    "target": 5}]},
     "link 0 refers to unknown node 5"),
    ({"nodes": [{"id": 0, "foo": 1}], "links": []}, "unknown node-link flavour"),
    ({"nodes": [{"id": 0, "cost_ram": "big", "cost_cpu": 1}], "links": []},
     "node 0 has non-numeric 'cost_ram'"),
    ({"nodes": [{"id": 0, "cost_ram": 1, "cost_cpu": 1}, {"id": 0, "cost_ram": 1,
                                                           "cost_cpu": 1}], "links": []},
     "same 'id'"),
    ({"nodes": [{"id": 0, "cost_ram": 1, "cost_cpu": 1}], "links": [{"source": 0,
                                                                    "target": 0}]},
     r"cycle through op 0 \('0'\)"),
    ({"graph": {}}, "needs a 'nodes' list"),
])
def test_nodelink_errors_name_the_problem(tmp_path, data, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(FormatError, match=message):
        load_graph(path)


def test_write_nodelink_needs_one_output_per_op():
    g = read_pbtxt(HAND_WRITTEN)
    with pytest.raises(FormatError, match="only output of op k"):
        write_nodelink(g)


# ---------------------------------------------------------------- native .npz

def test_native_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    graphs = []
    for i in range(200):
        g = random_graph(rng, int(rng.integers(1, 40)), name=f"graph {i}")
        order = rng.permutation(g.num_edges)  # the native format keeps any edge order
        graphs.append(g.replace(edge_tensor=g.edge_tensor[order],
                                edge_consumer=g.edge_consumer[order]))
    save_dataset(graphs, tmp_path / "set.data")
    assert load_dataset(tmp_path / "set.data") == graphs
    save_dataset([], tmp_path / "empty.npz")
    assert load_dataset(tmp_path / "empty.npz") == []
    save_graph(graphs[3], tmp_path / "one.npz")
    assert load_graph(tmp_path / "one.npz") == graphs[3].replace(name="one")
    assert load_dataset(tmp_path / "one.npz") == [graphs[3]]
    save_dataset(graphs[:2], tmp_path / "two.npz")
    with pytest.raises(FormatError, match="two.npz: holds 2 graphs, expected exactly one"):
        load_graph(tmp_path / "two.npz")


def test_native_errors_name_the_file(tmp_path):
    rng = np.random.default_rng(2)
    path = tmp_path / "set.npz"
    save_dataset([random_graph(rng, 20) for _ in range(5)], path)
    data = path.read_bytes()
    cases = {
        "truncated.npz": (data[: len(data) // 2], "corrupt or truncated"),
        "flipped.npz": (data[:len(data) // 2] + bytes([data[len(data) // 2] ^ 255])
                        + data[len(data) // 2 + 1:], "corrupt or truncated"),
        "text.npz": (b"hello", "not an .npz"),
    }
    for name, (content, message) in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(FormatError, match=message) as info:
            load_dataset(tmp_path / name)
        assert name in str(info.value)
    np.savez(tmp_path / "old.npz", format_version=np.int64(99))
    with pytest.raises(FormatError, match="old.npz: format version 99 is not supported"):
        load_dataset(tmp_path / "old.npz")
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(FormatError, match="other.npz: not a gsched dataset"):
        load_dataset(tmp_path / "other.npz")
    with np.load(path) as npz:
        arrays = dict(npz)
    arrays["edge_offsets"] = arrays["edge_offsets"][::-1]
    np.savez(tmp_path / "offsets.npz", **arrays)
    with pytest.raises(FormatError, match="offsets.npz: corrupt gsched dataset: inconsistent"):
        load_dataset(tmp_path / "offsets.npz")


# ---------------------------------------------------------------- dispatch

def test_load_graph_dispatch_and_errors(tmp_path):
    g = read_pbtxt(HAND_WRITTEN)
    (tmp_path / "g.weird").write_text(write_pbtxt(g))
    assert load_graph(tmp_path / "g.weird") == g.replace(name="g")
    (tmp_path / "garbage.xyz").write_bytes(bytes(range(128, 256)))
    with pytest.raises(FormatError, match="garbage.xyz: unknown extension '.xyz'"):
        load_graph(tmp_path / "garbage.xyz")
    (tmp_path / "garbage.abc").write_text("@@ not a graph")
    with pytest.raises(FormatError, match="garbage.abc: unknown extension.*line 1: syntax"):
        load_graph(tmp_path / "garbage.abc")
    for name in ("empty.pbtxt", "empty.json", "blank.abc"):
        (tmp_path / name).write_text("  \n")
        with pytest.raises(FormatError, match=f"{name}: empty file"):
            load_graph(tmp_path / name)
    with pytest.raises(FormatError, match="unknown extension '.png'"):
        save_graph(g, tmp_path / "g.png")


def test_load_graphs_expands_folders_in_order(tmp_path):
    rng = np.random.default_rng(3)
    folder = tmp_path / "set"
    folder.mkdir()
    graphs = {name: random_graph(rng, 6, name=Path(name).stem)
              for name in ("b.pbtxt", "a.npz", "c.txt")}
    for name, g in graphs.items():
        save_graph(g, folder / name)
    (folder / "README.md").write_text("not a graph")
    single = tmp_path / "z.pbtxt"
    save_graph(graphs["b.pbtxt"].replace(name="z"), single)
    loaded = load_graphs([single, folder])
    assert [Path(p).name for p, _ in loaded] == ["z.pbtxt", "a.npz", "b.pbtxt", "c.txt"]
    assert [g for _, g in loaded[1:]] == [graphs["a.npz"], graphs["b.pbtxt"], graphs["c.txt"]]
    assert load_graphs(str(single)) == loaded[:1]
