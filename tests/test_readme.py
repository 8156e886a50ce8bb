"""The README's Python examples run as printed: each ```python block is executed from the
repository root (as a user would paste it, with ``gsched`` and ``numpy as np`` imported by an
earlier block), and an expected output written as comment lines right after a ``print(...)``
must appear in what the block printed (up to whitespace; a comment's text after "→" is prose).
Blocks that trace JAX programs only have to run: what they print depends on the jaxpr and the
compiled HLO of the installed JAX. The first block reads ``../shared/examples/diamond.pbtxt``
and is skipped, saying so, where ``../shared`` is absent."""

import contextlib
import io
import re
from pathlib import Path

import numpy as np
import pytest

import gsched
from tests.graphs import SHARED

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
TRACES_JAX = ("import_jax", "optimize_jax")  # outputs depend on the installed JAX


def expected_outputs(block: str) -> list[str]:
    """The comment runs that follow a top-level ``print(`` line, joined, prose cut off."""
    found, lines = [], block.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("print("):
            continue
        run = []
        for follow in lines[i + 1:]:
            if not follow.startswith("#"):
                break
            run.append(follow.lstrip("#").strip())
        if run:
            found.append(" ".join(run).split("→")[0].strip())
    return found


def squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def test_the_readme_has_examples_with_expected_outputs():
    assert len(BLOCKS) >= 3
    assert sum(len(expected_outputs(b)) for b in BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs_as_printed(index, monkeypatch):
    block = BLOCKS[index]
    if "../shared" in block and not SHARED.is_dir():
        pytest.skip("this README example reads ../shared/examples, absent beside this clone")
    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, f"README block {index}", "exec"), {"gsched": gsched, "np": np})
    assert out.getvalue().strip(), "the example printed nothing"
    if any(name in block for name in TRACES_JAX):
        return
    printed = squeeze(out.getvalue())
    for expected in expected_outputs(block):
        assert squeeze(expected) in printed, (expected, out.getvalue())
