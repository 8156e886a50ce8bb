"""The public import surface: every name in ``gsched.__all__`` exists and nothing is missing."""

import types

import gsched


def test_public_names_resolve():
    for name in gsched.__all__:
        assert getattr(gsched, name) is not None, name


def test_all_lists_every_public_reexport():
    public = {n for n in dir(gsched) if not n.startswith("_")}
    modules = {n for n in public if isinstance(getattr(gsched, n), types.ModuleType)}
    assert public - modules - set(gsched.__all__) == set()
