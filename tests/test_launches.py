"""``gsched.harness.launches``: a compiled program's launches and bytes, read from its text."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax import lax

from gsched.harness.launches import array_bytes, launches


def _compiled_text(fn, *args) -> str:
    return jax.jit(fn).lower(*args).compile().as_text()


def test_array_bytes_sums_a_tuples_arrays():
    assert array_bytes("f32[2,3]") == 24
    assert array_bytes("(f32[2,3]{1,0}, s8[5]{0}, pred[])") == 24 + 5 + 1
    assert array_bytes("token[]") == 0


def test_one_fusion_reads_its_operand_and_writes_its_result():
    found = launches(_compiled_text(lambda x: jnp.sin(x) * 2 + 1, jnp.ones(1000)))
    assert len(found) == 1
    assert found[0].nbytes == 2 * 4000 and found[0].branch is None and found[0].loop is None


def test_branches_and_loops_are_walked_and_labelled():
    def fn(x, i):
        y = lax.switch(i, [lambda v: jnp.sin(v) * 2, lambda v: jnp.cos(v) + 1,
                           lambda v: jnp.exp(v) - 3], x)
        return lax.fori_loop(0, i + 3, lambda _, v: jnp.tanh(v) * 1.5, y)  # a while loop

    found = launches(_compiled_text(fn, jnp.ones(1000), 1))
    branches = {x.branch for x in found if x.branch is not None}
    assert {index for _, index in branches} == {0, 1, 2}
    assert len({name for name, _ in branches}) == 1  # one conditional
    in_loop = [x for x in found if x.loop is not None]
    assert in_loop and len({x.loop for x in in_loop}) == 1
    # Each branch's work reads the array and writes one.
    for index in range(3):
        assert sum(x.nbytes for x in found if x.branch and x.branch[1] == index) >= 8000
    assert all(x.opcode not in ("parameter", "tuple", "get-tuple-element") for x in found)


def test_text_without_an_entry_is_refused():
    with pytest.raises(ValueError, match="no ENTRY computation"):
        launches("HloModule m\n%f (x: f32[]) -> f32[] {\n}\n")
