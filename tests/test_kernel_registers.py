"""eval.kernel_registers: the kernels' Triton IR, captured per lane width without a GPU, and the
occupancy arithmetic; the compile with the optional ``triton`` package where it is installed."""

from __future__ import annotations

import importlib.util

import pytest

from eval import kernel_registers
from gsched.costmodel.pallas_decode import lane_widths


@pytest.mark.parametrize("kernel", ["list", "list_memory", "list_lanes", "list_fused",
                                    "list_lanes_fused", "priority"])
def test_one_triton_module_per_lane_width(kernel):
    modules = kernel_registers.triton_modules(20, 2, kernel, 2)
    widths = [width for width, _ in modules]
    assert widths == sorted(widths, reverse=True) and len(widths) == len(lane_widths(widths[0]))
    assert all("tt.func public @gsched_schedule" in text and "tt.reduce" in text
               for _, text in modules)


def test_programs_per_sm():
    # Per-warp registers in units of 256 (8 per thread), 65,536 per SM, at most 32 blocks and
    # 64 warps.
    assert kernel_registers.programs_per_sm(125, 2) == 8  # 128 · 32 · 2 = 8,192
    assert kernel_registers.programs_per_sm(230, 1) == 8  # 232 · 32 = 7,424
    assert kernel_registers.programs_per_sm(71, 4) == 7  # 72 · 32 · 4 = 9,216
    assert kernel_registers.programs_per_sm(16, 1) == 32  # the block limit
    assert kernel_registers.programs_per_sm(16, 4) == 16  # the warp limit


def test_writes_the_ir_and_with_triton_the_table(tmp_path):
    out = tmp_path / "registers.md"
    kernel_registers.main(["--size", "12", "--devices", "1", "--kernels", "list",
                           "--warps", "2", "--ttir-dir", str(tmp_path), "--output", str(out)])
    # 12 ops, D = 1: V_p = 16 lanes, one width.
    assert [p.name for p in tmp_path.glob("*.ttir")] == ["list_12_1_16.ttir"]
    if importlib.util.find_spec("triton") is None:
        assert not out.exists()  # the IR only: CI has no triton
        return
    rows = [line for line in out.read_text().splitlines() if line.startswith("| list |")]
    assert [row.split(" | ")[1:3] for row in rows] == [["16", "2"]]
    assert all(int(row.split(" | ")[3]) > 0 for row in rows)
