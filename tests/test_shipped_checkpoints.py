"""Every shipped checkpoint loads by its name (``--checkpoint regal_runtime``,
``options={"checkpoint": "topoformer_mid"}``), a path still wins over a name, and an unknown
name is an error naming it."""

import pytest

from gsched.infra.checkpoint import shipped_or_path
from gsched.policies.go import checkpoint as go_checkpoint
from gsched.policies.regal import checkpoint as regal_checkpoint
from gsched.policies.topoformer import checkpoint as topo_checkpoint

FAMILIES = {
    "regal": (regal_checkpoint.CHECKPOINTS, regal_checkpoint.load_policy),
    "go": (go_checkpoint.CHECKPOINTS, go_checkpoint.load_policy),
    "topoformer": (topo_checkpoint.CHECKPOINTS, topo_checkpoint.load_model),
}
SHIPPED = [(family, folder.name) for family, (root, _) in FAMILIES.items()
           for folder in sorted(root.iterdir()) if folder.is_dir()]


def test_every_family_ships_checkpoints():
    assert {family for family, _ in SHIPPED} == set(FAMILIES)
    assert ("topoformer", "topoformer_mid") in SHIPPED
    assert set(topo_checkpoint.SHIPPED) == {n for f, n in SHIPPED if f == "topoformer"}


@pytest.mark.parametrize("family, name", SHIPPED)
def test_a_shipped_checkpoint_loads_by_name(family, name, monkeypatch, tmp_path):
    root, load = FAMILIES[family]
    monkeypatch.chdir(tmp_path)  # a bare name that is no path here
    assert shipped_or_path(name, root) == root / name
    by_name = load(name) if family != "go" else load(name, method=name)
    by_path = load(root / name) if family != "go" else load(root / name, method=name)
    assert type(by_name[0]) is type(by_path[0])


def test_a_path_wins_over_a_name_and_unknown_names_are_errors(monkeypatch, tmp_path):
    root = topo_checkpoint.CHECKPOINTS
    monkeypatch.chdir(tmp_path)
    (tmp_path / "topoformer_mid").mkdir()
    assert shipped_or_path("topoformer_mid", root).resolve() == tmp_path / "topoformer_mid"
    assert shipped_or_path("sub/topoformer_mid", root) == tmp_path.joinpath(
        "sub/topoformer_mid").relative_to(tmp_path)
    with pytest.raises(ValueError, match="no REGAL checkpoint at regal_huge"):
        regal_checkpoint.load_policy("regal_huge")
    with pytest.raises(ValueError, match="topoformer_huge does not exist"):
        topo_checkpoint.load_model("topoformer_huge")
