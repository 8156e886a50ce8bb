"""Smoke test of the benchmarks (``python -m eval.bench_cost_model`` / ``eval.bench_brkga``): a tiny
run writes its Markdown section, and a re-run replaces that section without touching the
others (``gsched.harness.benchmarks.write_section``); the accelerator-session tools
(``eval.check_decoders``, ``eval.profile_decode``, ``eval.tune_kernel``) run and report, and
the lines ``eval/device_session.sh`` edits when a kernel fails its check are still there;
``eval.compile_train_step`` compiles a PPO iteration with "auto" as on a GPU and undoes it;
``eval.gpu_modules`` tables a workload compiled for a target against the CPU module;
``eval.importer_coverage`` tables a program at both levels."""

from __future__ import annotations

import re
from collections import namedtuple
from pathlib import Path

import numpy as np
import pytest

from eval import bench_cost_model as bench
from eval import (
    check_decoders,
    compile_train_step,
    gpu_modules,
    importer_coverage,
    profile_decode,
    tune_kernel,
)
from gsched.core.padding import pad_graph, pad_keys
from gsched.costmodel.evaluate import evaluate_with_decoder
from gsched.generators import random_computation_graph
from gsched.harness.benchmarks import FILE_HEADER, mismatches, parse_int_list, write_section
from gsched.harness.cost_model_bench import _auto_decoder_note
from tests.graphs import GPU_HLO

TITLE = "Smoke test section"
OTHER = "## GPU results from another machine\n\n| keep | me |\n| --- | --- |\n| 1 | 2 |\n"


def _args(output) -> list[str]:
    return ["--sizes", "20", "--devices", "1,2", "--population", "8", "--repeats", "1",
            "--chunks", "", "--sweep-populations", "", "--batch-graphs", "2",
            "--output", str(output), "--section-title", TITLE]


def _table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if re.match(r"\| 20 \| 32/\d+/\d+ \| [12] \|", line)]


def test_bench_writes_and_replaces_its_section(tmp_path):
    output = tmp_path / "benchmarks.md"
    output.write_text("# Benchmarks\n\n" + OTHER)

    results = bench.main(_args(output))
    assert all(r.evals_per_s > 0 and r.compile_s >= 0 for r in results.values())
    first = output.read_text()
    assert first.count(f"## {TITLE}") == 1
    assert len(_table_rows(first)) == 2  # N=20 × D ∈ {1, 2}
    assert "Batch of 2 different 20-op graphs" in first
    assert "- Date: " in first and "- Machine: " in first and "- Command: `python -m " in first
    assert OTHER in first

    bench.main(_args(output))  # compiled functions are cached: fast
    second = output.read_text()
    assert second.count(f"## {TITLE}") == 1
    assert len(_table_rows(second)) == 2
    assert second.count("## GPU results from another machine") == 1 and OTHER in second
    assert second.startswith("# Benchmarks\n")


def test_write_section_keeps_sections_after_it(tmp_path):
    output = tmp_path / "b.md"
    output.write_text("# Benchmarks\n\n## A\n\nold a\n\n## B\n\nbody b\n")
    write_section(output, "A", "new a\n")
    assert output.read_text() == "# Benchmarks\n\n## A\n\nnew a\n\n## B\n\nbody b\n"
    write_section(output, "C", "c\n")
    assert output.read_text().endswith("## B\n\nbody b\n\n## C\n\nc\n")
    write_section(tmp_path / "new" / "x.md", "A", "a\n")
    assert (tmp_path / "new" / "x.md").read_text().startswith(FILE_HEADER)
    assert parse_int_list("100, 500,2000") == (100, 500, 2000) and parse_int_list("") == ()


def test_brkga_bench_quick_run_writes_its_section(tmp_path):
    from eval import bench_brkga

    output = tmp_path / "benchmarks.md"
    rows = bench_brkga.main(["--quick", "--output", str(output)])
    assert [r["num_ops"] for r in rows] == [30] and rows[0]["per_graph_s"] > 0
    text = output.read_text()
    assert "## BRKGA 300-evaluation wall time" in text and "| 30 | 32/" in text


def test_the_lines_the_device_session_edits_on_a_failed_check_exist():
    # A failed kernel check on a GPU sends "auto" back to a slower decoder by editing one line
    # in place (sed); if that line changed, the edit would silently do nothing.
    root = Path(__file__).resolve().parents[1]
    script = (root / "eval" / "device_session.sh").read_text()
    edits = re.findall(r"sed -i 's/\^(.*?)\$/.*?/' \\?\s*(\S+)", script)
    assert len(edits) == 3
    for line, path in edits:
        assert (root / path).read_text().splitlines().count(line) == 1, (path, line)


def test_the_main_table_names_the_decoder_auto_ran():
    assert "`gsched.costmodel.pallas_lanes`" in _auto_decoder_note("gpu")
    for backend in ("cpu", "tpu"):  # no Pallas kernel there: the dense decodes
        assert "dense one-device decode" in _auto_decoder_note(backend)


def test_check_decoders_passes_identical_decoders_and_names_a_difference():
    assert check_decoders.main(["--sizes", "15", "--devices", "2", "--population", "6",
                                "--decoders", "dense"]) == 0
    graph = random_computation_graph(10, 0)
    padded = pad_graph(graph)
    keys = pad_keys(np.random.default_rng(0).random((4, graph.chromosome_length(2))), graph,
                    padded.bucket, 2)
    a = evaluate_with_decoder(padded, keys, num_devices=2, decoder="loop")
    runtime = np.asarray(a.runtime).copy()
    runtime[2] = np.nextafter(runtime[2], np.float32(np.inf))  # one ulp, third chromosome
    assert mismatches(a, a) == []
    assert mismatches(a, a._replace(runtime=runtime)) == [
        "runtime: 1 chromosomes differ, first 2"]
    inner, outer = namedtuple("Inner", "x"), namedtuple("Outer", "schedule start")
    want = outer(inner(np.zeros(3, np.float32)), np.ones(3, np.float32))
    got = want._replace(schedule=inner(np.array([0, 1, 0], np.float32)))
    assert mismatches(want, got) == ["schedule.x: 1 chromosomes differ, first 1"]


def test_profile_decode_times_every_stage(capsys):
    profile_decode.main(["--sizes", "12", "--devices", "1,2", "--population", "4",
                         "--repeats", "1"])
    lines = capsys.readouterr().err.splitlines()
    # No kernel on the CPU: placement, + loop set-up, + slot ranking, + slot tables, + kernel
    # inputs, + peak tables and the memory walk alone (the list scheduler), + memory walk,
    # per D.
    assert sum("ms/call" in line for line in lines) == 16
    for stage in ("slot ranking", "slot tables", "kernel inputs", "kernel inputs + peak tables",
                  "memory walk alone"):
        pattern = re.compile(r"placement \+ " + re.escape(stage) + r" +\d")
        assert sum(bool(pattern.search(line)) for line in lines) == 2, stage
    assert sum("memory walk = evaluate_population" in line for line in lines) == 2
    # XLA CPU's cost analysis counts every stage's bytes; the prefixes grow.
    moved = [float(m.group(1)) for line in lines if (m := re.search(r"([\d.]+) kB/eval", line))]
    assert len(moved) == 16 and all(x > 0 for x in moved)
    # D = 1: placement ⊂ slot ranking ⊂ slot tables ⊂ kernel inputs ⊂ peak tables.
    assert moved[0] < moved[2] < moved[3] < moved[4] < moved[5]
    profile_decode.main(["--sizes", "12", "--devices", "2", "--population", "4",
                         "--repeats", "1", "--scheduler", "fifo"])
    lines = capsys.readouterr().err.splitlines()
    assert sum("ms/call" in line for line in lines) == 6 and "fifo scheduler" in lines[0]


def test_profile_decode_kernel_rows_run(capsys, monkeypatch):
    # The rows a GPU adds (each kernel's schedule; the lane kernel with SPEC §3's walk in its
    # branch; the list kernels with SPEC §3 inside), run here in Pallas' interpreter: their
    # times mean nothing, their programs run.
    monkeypatch.setattr(profile_decode, "pallas_applies", lambda: True)
    for scheduler, rows in (("list", ("kernel inputs + kernel and result",
                                      "kernel inputs + lane kernel and result",
                                      "+ memory walk in the kernel's branch",
                                      "peak tables + kernel with memory (fused)",
                                      "peak tables + lane kernel with memory")),
                            ("priority", ("kernel inputs + lane kernel and result",
                                          "+ memory walk in the kernel's branch",
                                          "peak tables + lane kernel with memory"))):
        profile_decode.main(["--sizes", "12", "--devices", "1", "--population", "3",
                             "--repeats", "1", "--scheduler", scheduler])
        lines = capsys.readouterr().err.splitlines()
        for row in rows:
            assert sum(f"D = 1: {row} " in line for line in lines) == 1, row


def test_profile_decode_counts_launches_compiled_for_a_device(capsys, tmp_path):
    # Compiled, not run: each stage's launches and the bytes they touch, from the program text.
    profile_decode.main(["--sizes", "12", "--devices", "2", "--population", "4",
                         "--compile-for", "cpu"])
    lines = capsys.readouterr().err.splitlines()
    assert "compiled for cpu" in lines[0]
    rows = [line for line in lines if re.search(r"\d+ launches, +[\d.]+ kB/eval", line)]
    assert len(rows) == 8 and not any("ms/call" in line for line in lines)
    moved = [float(re.search(r"([\d.]+) kB/eval", line).group(1)) for line in rows]
    assert all(x > 0 for x in moved) and moved[0] < moved[2] < moved[3]  # prefixes grow
    with pytest.raises(SystemExit, match="cannot read the GPU target"):
        profile_decode.main(["--sizes", "12", "--compile-for", str(tmp_path / "none.pbtxt")])


def test_compile_train_step_compiles_with_the_kernels_auto_would_run_and_restores(capsys):
    # GDP's PPO iteration compiled for this CPU with "auto" as on a GPU (kernels interpreted):
    # the lane kernels from 0 chromosomes per call; afterwards "auto" is this machine's again.
    from gsched.costmodel import evaluate

    before = (evaluate.pallas_applies, evaluate._fused_decoder, evaluate.LANES_MIN_CHROMOSOMES)
    config = Path(__file__).resolve().parents[1] / "train" / "configs" / "gdp_small.toml"
    compile_train_step.main(["--config", str(config), "--compile-for", "cpu", "--lanes-from", "0",
                             "data.num_graphs=2", "data.valid_graphs=1", "batch_size=2",
                             "ppo.samples=2"])
    line = capsys.readouterr().err.splitlines()[-1]
    assert re.search(r"for cpu, lane kernels from 0 chromosomes per call: data [\d.]+ s, "
                     r"lowering [\d.]+ s, compiling [\d.]+ s; 'auto' chose pallas_lanes ×\d+$",
                     line), line
    assert (evaluate.pallas_applies, evaluate._fused_decoder,
            evaluate.LANES_MIN_CHROMOSOMES) == before


def test_gpu_modules_tables_a_program_compiled_for_a_target_against_the_cpu_module(tmp_path):
    # Compiled "for" the CPU, the two modules are one: same ops, same flops, no library call
    out = tmp_path / "bench.md"
    gpu_modules.main(["--compile-for", "cpu", "--names", "gpt", "--modes", "inference",
                      "--output", str(out), "--section-title", TITLE])
    text = out.read_text()
    row = re.search(r"^\| gpt small inference \| [\d.]+ \| (\d+) / (\d+) \| 0 / 0 \| 0 \| — \| "
                    r"([\d.]+) / ([\d.]+) \| 0.0 \|$", text, re.M)
    assert row and row[1] == row[2] and row[3] == row[4], text
    assert f"## {TITLE}" in text and "--compile-for cpu" in text
    # an H100's modules: cuBLAS products and cuDNN attention, each in its column
    calls = {name: gpu_modules.library_calls((GPU_HLO / name).read_text())
             for name in ("products.txt", "attention_grad.txt")}
    assert (calls["products.txt"]["cuBLAS"], calls["attention_grad.txt"]["cuDNN"]) == (2, 2)
    assert calls["products.txt"]["other"] == calls["attention_grad.txt"]["other"] == 0


def test_tune_kernel_times_every_variant_and_checks_them_identical(tmp_path):
    out = tmp_path / "bench.md"
    tune_kernel.main(["--size", "12", "--devices", "2", "--states", "registers,memory,lanes",
                      "--chunks", "3", "--warps", "0,2", "--population", "3", "--repeats", "1",
                      "--output", str(out), "--section-title", TITLE])
    text = out.read_text()
    rows = [line for line in text.splitlines() if re.match(
        r"\| (lanes in registers|lanes in memory|a chromosome per lane) \| 3 \| (default|2) \| "
        r"one per block \|", line)]
    assert len(rows) == 6
    assert "Pallas' interpreter" in text and "Fastest: " in text
    # The lane kernel's programs (their blocks in turn: tests/test_pallas_lanes.py)
    tune_kernel.main(["--size", "12", "--devices", "2", "--states", "lanes", "--chunks", "2",
                      "--programs", "0,1", "--population", "3", "--repeats", "1", "--output",
                      str(out), "--section-title", TITLE])
    rows = [line for line in out.read_text().splitlines() if line.startswith("| ")][2:]
    assert [line.split(" | ")[3] for line in rows] == ["one per block", "1"]
    tune_kernel.main(["--size", "12", "--devices", "2", "--scheduler", "fifo", "--chunks", "1,2",
                      "--population", "3", "--repeats", "1", "--output", str(out),
                      "--section-title", TITLE])
    assert "The fifo schedule alone" in out.read_text()
    # Whole evaluations, through the decoders' one entry point (two trees' A/B on a GPU)
    tune_kernel.main(["--size", "12", "--devices", "2", "--states", "registers,lanes",
                      "--chunks", "2", "--population", "3", "--repeats", "1", "--whole",
                      "--output", str(out), "--section-title", TITLE])
    text = out.read_text()
    assert "Whole list evaluations" in text and "The fifo schedule alone" not in text
    assert len(re.findall(r"\| (lanes in registers|a chromosome per lane) \| 2 \| default \|",
                          text)) == 2
    with pytest.raises(SystemExit):  # argparse: --whole runs the decoders' default warps
        tune_kernel.main(["--size", "12", "--whole", "--warps", "2"])
    with pytest.raises(SystemExit):  # programs: the list lane kernel's
        tune_kernel.main(["--size", "12", "--scheduler", "fifo", "--programs", "2"])


def test_importer_coverage_tables_a_program_at_both_levels():
    import jax.numpy as jnp

    line = importer_coverage.row("solve", importer_coverage.solve,
                                 (jnp.eye(64) * 2 + 0.1, jnp.ones((64, 2))))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[0] == "solve" and cells[-1] == "—"  # nothing left to the generic fallback
    assert 0.9 < float(cells[4]) < 1.1 and float(cells[1]) > float(cells[3])  # XLA: LAPACK = 0
    assert len(importer_coverage.programs()) == 8
