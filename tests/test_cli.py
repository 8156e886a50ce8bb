"""The command line (SPEC §6): ``python -m gsched evaluate``."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gsched.cli import main
from gsched.formats import load_graph
from tests.graphs import MOCCASIN, SHARED

REPO = Path(__file__).resolve().parents[1]
DIAMOND = SHARED / "examples" / "diamond.pbtxt"
VGG16 = MOCCASIN / "VGG16_256_224_224_3_test_nx.json"
needs_diamond = pytest.mark.skipif(not DIAMOND.is_file(), reason="shared diamond.pbtxt absent")

WORKED_EXAMPLE = [  # SPEC §5: (D, keys, placement, order, device peaks); runtime is 10
    (1, [.5] * 4 + [.9, .8, .7, .1] + [.5] * 4, [0, 0, 0, 0],
     [["op", 0], ["op", 1], ["op", 2], ["op", 3]], [14]),
    (1, [.5] * 4 + [.9, .7, .8, .1] + [.5] * 4, [0, 0, 0, 0],
     [["op", 0], ["op", 2], ["op", 1], ["op", 3]], [12]),
    (2, [.9, .1, .9, .1, .1, .9, .9, .1] + [.9, .8, .7, .1] + [.5, .6, .5, .5, .2, .3, .5, .5],
     [0, 0, 1, 0], [["op", 0], ["op", 1], ["xfer", 0, 1], ["op", 2], ["xfer", 2, 0], ["op", 3]],
     [6, 12]),
]
D2_KEYS = WORKED_EXAMPLE[2][1]

CYCLE = """
node { name: "a" id: 0 input_info { preceding_node: 1 preceding_port: 0 }
       output_info { size: 4 alias_input_port: -1 } compute_cost: 2 }
node { name: "b" id: 1 input_info { preceding_node: 0 preceding_port: 0 }
       output_info { size: 2 alias_input_port: -1 } compute_cost: 3 }
"""


def save(tmp_path, keys, name="keys.npy", dtype=np.float64):
    path = tmp_path / name
    np.save(path, np.asarray(keys, dtype))
    return str(path)


def run_cli(capsys, *argv):
    code = main(["evaluate", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def check_result(out, placement, order, peaks, runtime=10.0):
    result = json.loads(out)
    assert result["placement"] == placement
    assert result["order"] == order
    assert result["device_peaks"] == peaks
    assert result["peak_memory"] == max(peaks)
    assert result["runtime"] == runtime
    return result


@needs_diamond
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("row", WORKED_EXAMPLE)
def test_worked_example(capsys, tmp_path, row, dtype):
    devices, keys, placement, order, peaks = row
    code, out, err = run_cli(capsys, "--graph", DIAMOND, "--devices", devices,
                             "--keys", save(tmp_path, keys, dtype=dtype))
    assert (code, err) == (0, "")
    assert out.count("\n") == 1  # one JSON object
    result = check_result(out, placement, order, peaks)
    assert result["feasible"] is True
    assert (result["graph"], result["num_devices"], result["num_ops"], result["num_tensors"]) \
        == (str(DIAMOND), devices, 4, 4)


@needs_diamond
@pytest.mark.parametrize("capacity, feasible", [(11.5, False), (12, True)])
def test_capacity_and_transfer_costs(capsys, tmp_path, capacity, feasible):
    keys = save(tmp_path, D2_KEYS)
    code, out, _ = run_cli(capsys, "--graph", DIAMOND, "--devices", 2, "--keys", keys,
                           "--capacity", capacity)
    assert code == 0 and json.loads(out)["feasible"] is feasible
    # a 0–2, b 2–5 on device 0, X(t0,1) 5–8 (1 + 4/2), c 8–12, X(t2,0) 12–14.5, d → 15.5
    code, out, _ = run_cli(capsys, "--graph", DIAMOND, "--devices", 2, "--keys", keys,
                           "--latency", 1, "--bandwidth", 2)
    assert code == 0
    check_result(out, WORKED_EXAMPLE[2][2], WORKED_EXAMPLE[2][3], [6, 12], runtime=15.5)


@needs_diamond
def test_execution_model_flags(capsys, tmp_path):
    """SPEC §8.4: the priority scheduler's row (runtime 7 and every start/end), the roofline
    row (hbm_bandwidth 1, no fusion: 23), and a device preset's roofline values."""
    code, out, _ = run_cli(capsys, "--graph", DIAMOND, "--devices", 2,
                           "--keys", save(tmp_path, D2_KEYS), "--scheduler", "priority")
    result = check_result(out, *WORKED_EXAMPLE[2][2:4], [6, 12], runtime=7.0)
    assert code == 0 and result["start"] == [0, 2, 2, 2, 6, 6]
    assert result["end"] == [2, 5, 2, 6, 6, 7]
    d1 = save(tmp_path, WORKED_EXAMPLE[0][1], "d1.npy")
    code, out, _ = run_cli(capsys, "--graph", DIAMOND, "--devices", 1, "--keys", d1,
                           "--hbm-bandwidth", 1)
    assert code == 0 and json.loads(out)["runtime"] == 23.0
    code, out, _ = run_cli(capsys, "--graph", DIAMOND, "--devices", 1, "--keys", d1,
                           "--device-preset", "h100", "--launch-overhead", 0.5)
    assert code == 0 and json.loads(out)["runtime"] == 10.0 + 4 * 0.5  # bytes/HBM ≈ 0


@needs_diamond
@pytest.mark.subprocess
def test_python_dash_m(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gsched", "evaluate", "--graph", str(DIAMOND),
                           "--devices", "2", "--keys", save(tmp_path, D2_KEYS)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    check_result(proc.stdout, *WORKED_EXAMPLE[2][2:])


@pytest.mark.skipif(not VGG16.is_file(), reason="shared moccasin benchmark absent")
def test_nodelink_benchmark(capsys, tmp_path):
    graph = load_graph(VGG16)
    n = graph.num_ops
    keys = np.random.default_rng(0).random(graph.chromosome_length(2))
    code, out, err = run_cli(capsys, "--graph", VGG16, "--devices", 2,
                             "--keys", save(tmp_path, keys))
    assert (code, err) == (0, "")
    result = json.loads(out)  # strict JSON: no NaN / Infinity
    assert (result["num_ops"], result["num_tensors"]) == (n, graph.num_tensors)
    assert len(result["placement"]) == n and set(result["placement"]) <= {0, 1}
    assert sorted(j for kind, j, *_ in result["order"] if kind == "op") == list(range(n))
    assert all(len(item) == 3 for item in result["order"] if item[0] == "xfer")
    assert len(result["device_peaks"]) == 2 and result["feasible"] is True
    assert result["peak_memory"] == max(result["device_peaks"]) > 0
    assert result["runtime"] > 0


def bad_inputs(tmp_path):
    """(argv after ``evaluate``, a fragment the error must contain) per bad input."""
    keys = save(tmp_path, WORKED_EXAMPLE[0][1])
    text = tmp_path / "keys.txt"
    text.write_text("0.5 0.5\n")
    npz = tmp_path / "keys.npz"
    np.savez(npz, keys=np.zeros(12))
    truncated = tmp_path / "truncated.npy"
    truncated.write_bytes(Path(keys).read_bytes()[:-4])
    cycle = tmp_path / "cycle.pbtxt"
    cycle.write_text(CYCLE)
    corrupt = tmp_path / "corrupt.pbtxt"
    corrupt.write_text('node { name: "a" id: ')
    binary = tmp_path / "graph.bin"
    binary.write_bytes(b"\x00\xff\xfe")
    huge = tmp_path / "huge.pbtxt"
    huge.write_text(DIAMOND.read_text().replace("size: 4 ", "size: 1e300 "))
    g = ["--graph", str(DIAMOND)]
    return [
        ([], "required: --graph, --devices, --keys"),
        ([*g, "--devices", "1"], "--keys"),
        (["--graph", str(tmp_path / "missing.pbtxt"), "--devices", 1, "--keys", keys],
         "missing.pbtxt: No such file"),
        (["--graph", str(tmp_path), "--devices", 1, "--keys", keys], "cannot read graph file"),
        (["--graph", str(corrupt), "--devices", 1, "--keys", keys], "syntax error"),
        (["--graph", str(binary), "--devices", 1, "--keys", keys], "unknown extension '.bin'"),
        (["--graph", str(cycle), "--devices", 1, "--keys", keys], "cycle through op 0 ('a')"),
        (["--graph", str(huge), "--devices", 1, "--keys", keys], "float32 cost model supports"),
        ([*g, "--devices", 1, "--keys", keys, "--bandwidth", "1e-300"], "bandwidth must be > 0"),
        ([*g, "--devices", 1, "--keys", str(tmp_path / "missing.npy")],
         "missing.npy: No such file"),
        ([*g, "--devices", 1, "--keys", str(text)], "keys.txt is not a .npy file"),
        ([*g, "--devices", 1, "--keys", str(npz)], "keys.npz is not a .npy file"),
        ([*g, "--devices", 1, "--keys", str(truncated)], "not a valid .npy file"),
        ([*g, "--devices", 1, "--keys", save(tmp_path, np.full((3, 4), .5), "2d.npy")],
         "shape (3, 4), expected (12,)"),
        ([*g, "--devices", 2, "--keys", keys],
         "shape (12,), expected (20,) = N·D + N + T·D with N=4, T=4, D=2"),
        ([*g, "--devices", 1, "--keys", save(tmp_path, [np.nan] + [.5] * 11, "nan.npy")],
         "key 0 is"),
        ([*g, "--devices", 1, "--keys", save(tmp_path, [.5] * 5 + [1.5] + [.5] * 6, "big.npy")],
         "key 5 is"),
        ([*g, "--devices", 1, "--keys", save(tmp_path, [-.1] + [.5] * 11, "neg.npy")],
         "in [0, 1]"),
        ([*g, "--devices", 1, "--keys", save(tmp_path, ["x"] * 12, "str.npy", dtype=str)],
         "numeric"),
        ([*g, "--devices", 0, "--keys", keys], "--devices: must be >= 1"),
        ([*g, "--devices", "two", "--keys", keys], "--devices: expected an integer"),
        ([*g, "--devices", 1, "--keys", keys, "--latency", -1], "latency must be"),
        ([*g, "--devices", 1, "--keys", keys, "--bandwidth", 0], "bandwidth must be > 0"),
        ([*g, "--devices", 1, "--keys", keys, "--bandwidth", -2], "bandwidth must be > 0"),
        ([*g, "--devices", 1, "--keys", keys, "--capacity", -1], "capacity must be"),
        ([*g, "--devices", 1, "--keys", keys, "--frobnicate"], "unrecognized arguments"),
        ([*g, "--devices", 1, "--keys", keys, "--hbm-bandwidth", 0], "hbm_bandwidth must be"),
        ([*g, "--devices", 1, "--keys", keys, "--launch-overhead", -1], "launch_overhead must"),
        ([*g, "--devices", 1, "--keys", keys, "--scheduler", "lifo"], "invalid choice: 'lifo'"),
        ([*g, "--devices", 1, "--keys", keys, "--device-preset", "p100"], "invalid choice"),
    ]


@needs_diamond
def test_bad_input(capsys, tmp_path):
    for argv, fragment in bad_inputs(tmp_path):
        code, out, err = run_cli(capsys, *argv)
        assert code == 2, argv
        assert out == "", argv
        assert err.count("\n") == 1 and err.startswith("gsched: error: "), err
        assert fragment in err, (fragment, err)


@pytest.mark.parametrize("argv, fragment", [([], "required: COMMAND"),
                                            (["frobnicate"], "invalid choice: 'frobnicate'")])
def test_bad_command(capsys, argv, fragment):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and fragment in err
