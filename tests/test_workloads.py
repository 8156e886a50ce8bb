"""The papers' workloads as JAX programs (gsched.workloads; docs/workloads.md)."""

from __future__ import annotations

import io
import json
import warnings

import jax
import numpy as np
import pytest

from gsched.formats import load_graph
from gsched.importers import FallbackWarning, import_jax
from gsched.workloads import MODES, SIZES, WORKLOADS, Workload, build_graphs, program
from gsched.workloads.build import main, markdown_table

NAMES = ("rnnlm", "gnmt", "transformer_xl", "inception", "amoebanet", "wavenet", "resnet",
         "gpt")


def test_registry():
    assert tuple(WORKLOADS) == NAMES
    assert SIZES == ("small", "medium", "large") and MODES == ("inference", "train")
    for name, w in WORKLOADS.items():
        assert isinstance(w, Workload) and w.name == name and w.family and callable(w.build)


@pytest.mark.parametrize("name", NAMES)
def test_small_inference_program_runs_and_imports(name):
    fn, args = program(name, "small", "inference")
    out = jax.eval_shape(fn, *args)
    assert jax.tree_util.tree_leaves(out)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)  # every primitive has a flop formula
        g = import_jax(fn, *args, level="jaxpr")
    assert 20 < g.num_ops < 1500
    assert g.is_input.any()
    assert g.is_input[:int(g.is_input.sum())].all()  # program inputs first
    for layer in ("layer_0", "layer_1"):  # every small model has at least two layers
        assert any(layer in s.split("/") for s in g.op_scopes), layer
    assert g.op_flops.sum() > 0


def test_programs_are_deterministic():
    (_, a), (_, b) = program("gpt"), program("gpt")
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_train_program_imports_at_both_levels():
    fn, args = WORKLOADS["gpt"].build("small", "train")
    params, opt_state = args[0], args[1]
    loss, new_params, new_state = jax.eval_shape(fn, *args)
    assert loss.shape == ()
    assert jax.tree_util.tree_structure(new_params) == jax.tree_util.tree_structure(params)
    assert jax.tree_util.tree_structure(new_state) == jax.tree_util.tree_structure(opt_state)
    forward_fn, forward_args = program("gpt", "small", "inference")
    forward = import_jax(forward_fn, *forward_args, level="jaxpr")
    jaxpr = import_jax(fn, *args, level="jaxpr")
    hlo = import_jax(fn, *args, level="hlo")
    assert jaxpr.num_ops > 2 * forward.num_ops  # forward + backward + Adam
    assert hlo.num_ops > 20 and hlo.is_input.any()
    assert any("layer_" in s for s in jaxpr.op_scopes)
    assert any("layer_" in s for s in hlo.op_scopes)
    assert any(s.startswith("transpose(") for s in jaxpr.op_scopes)  # the backward pass


def test_train_program_of_a_recurrent_model_imports():
    fn, args = program("rnnlm", "small", "train")
    g = import_jax(fn, *args, level="jaxpr")
    assert g.num_ops > 500 and any("layer_1" in s for s in g.op_scopes)


@pytest.mark.parametrize("args, expected", [
    (("nope", "small", "inference"), "'nope'; expected one of rnnlm, gnmt, transformer_xl"),
    (("gpt", "tiny", "inference"), "'tiny'; expected one of small, medium, large"),
    (("gpt", "small", "eval"), "'eval'; expected one of inference, train"),
])
def test_bad_arguments_raise(args, expected):
    with pytest.raises(ValueError, match=expected):
        program(*args)
    if args[0] == "gpt":
        with pytest.raises(ValueError, match=expected):
            WORKLOADS["gpt"].build(*args[1:])


def test_build_command_writes_graph_and_index(tmp_path, capsys):
    assert main(["build", "--out", str(tmp_path), "--names", "wavenet", "--modes",
                 "inference"]) == 0
    path = tmp_path / "wavenet_small_inference_jaxpr.json"
    g = load_graph(path)
    fn, args = program("wavenet")
    assert g.num_ops == import_jax(fn, *args).num_ops
    assert any("layer_" in s for s in g.op_scopes) and g.op_flops.sum() > 0
    index = json.loads((tmp_path / "index.json").read_text())
    (entry,) = index["files"]
    assert entry["file"] == path.name and entry["num_ops"] == g.num_ops
    assert entry["num_tensors"] == g.num_tensors and entry["import_seconds"] >= 0
    assert (entry["name"], entry["size"], entry["mode"], entry["level"]) == \
        ("wavenet", "small", "inference", "jaxpr")
    captured = capsys.readouterr()
    assert "[1/1] wavenet small inference jaxpr" in captured.err and "ETA" in captured.err
    assert json.loads(captured.out)["files"] == 1
    assert main(["table", str(tmp_path)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("| workload | size | mode | ops (jaxpr) | ops (hlo) |")
    assert table[2].startswith(f"| wavenet | small | inference | {g.num_ops:,} | — |")


def test_markdown_table_orders_rows_and_merges_levels():
    entry = {"name": "gpt", "size": "medium", "mode": "train", "level": "hlo", "num_ops": 2500,
             "num_inputs": 3, "import_seconds": 15.0}
    rows = [dict(entry, level="jaxpr", num_ops=7011), entry,
            dict(entry, name="rnnlm", size="large", mode="inference", level="jaxpr",
                 num_ops=12240)]
    lines = markdown_table([{"files": rows}]).splitlines()
    assert lines[2] == "| rnnlm | large | inference | 12,240 | — | 3 | 15.00 | — |"
    assert lines[3] == "| gpt | medium | train | 7,011 | 2,500 | 3 | 15.00 | 15.00 |"


def test_build_rejects_bad_selections(tmp_path):
    with pytest.raises(ValueError, match="level"):
        build_graphs(tmp_path, names=["gpt"], levels=["xla"], log=io.StringIO())
    with pytest.raises(SystemExit) as err:
        main(["build", "--out", str(tmp_path), "--modes", "eval"])
    assert err.value.code == 2
    assert not list(tmp_path.iterdir())
