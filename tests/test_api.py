"""The public import surface: every name in ``gsched.__all__`` exists and nothing is missing."""

import gsched


def test_public_names_resolve():
    for name in gsched.__all__:
        assert getattr(gsched, name) is not None, name


def test_all_lists_every_public_reexport():
    public = {n for n in dir(gsched) if not n.startswith("_")}
    modules = {"brkga", "cost_model", "decoder", "fixedpoint", "formats", "generators", "graph",
               "memory", "padding", "cli", "random_search", "baselines", "local_search", "search"}
    assert public - modules - set(gsched.__all__) == set()
