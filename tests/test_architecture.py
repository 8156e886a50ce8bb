"""The package layout keeps the pipeline visible: no module imports a later stage, no private
name crosses a module boundary, and library code lives in ``gsched/`` (``eval/`` and ``train/``
hold command-line entry points that nothing in the library imports)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Pipeline stages in order; a module may import its own stage or an earlier one.
STAGES = [
    ("gsched.core",),
    ("gsched.formats", "gsched.generators", "gsched.importers", "gsched.workloads"),
    ("gsched.costmodel",),
    ("gsched.registry",),
    ("gsched.search",),
    ("gsched.baselines",),
    ("gsched.policies",),
    ("gsched.methods",),
    ("gsched.harness", "gsched.plot", "gsched.programs", "gsched.cli", "gsched.__main__"),
    ("gsched",),  # the package's public surface (gsched/__init__.py)
]
INFRA = "gsched.infra"  # infrastructure (configs, logs, checkpoints): importable from any stage


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _stage(module: str) -> int | None:
    """The stage of a module (longest matching prefix), None for infra."""
    if module == INFRA or module.startswith(INFRA + "."):
        return None
    best = None
    for index, prefixes in enumerate(STAGES):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > len(best[1]):
                    best = (index, prefix)
    assert best is not None, f"{module} is in no stage; add it to STAGES"
    return best[0]


def _imports(path: Path):
    """(imported module, names, line) of every ``import`` in ``path`` (lazy ones too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, [a.name for a in node.names], node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno


LIBRARY = sorted((ROOT / "gsched").rglob("*.py"))
SCRIPTS = sorted((ROOT / "eval").glob("*.py")) + sorted((ROOT / "train").glob("*.py"))


def test_stages_cover_every_library_module():
    for path in LIBRARY:
        _stage(_module_name(path))


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_imports_a_later_stage(path):
    own = _module_name(path)
    own_stage = _stage(own)
    for module, names, line in _imports(path):
        if module != "gsched" and not module.startswith("gsched."):
            assert not module.startswith(("eval", "train")), \
                f"{own}:{line} imports {module}: the library never imports eval/ or train/"
            continue
        targets = [module] if module != "gsched" else [f"gsched.{n}" for n in names]
        for target in targets:
            stage = _stage(target) if target != "gsched" else len(STAGES) - 1
            if stage is None:
                continue
            if own_stage is None:  # infra imports only the core
                assert stage == 0, f"{own}:{line}: infrastructure imports {target}"
                continue
            assert stage <= own_stage, (f"{own}:{line} (stage {own_stage}) imports {target} "
                                        f"(later stage {stage})")


@pytest.mark.parametrize("path", LIBRARY + SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_private_name_crosses_a_module_boundary(path):
    own = _module_name(path)
    for module, names, line in _imports(path):
        if module.split(".")[0] not in ("gsched", "eval", "train") or module == own:
            continue
        private = [n for n in names if n.startswith("_") and not n.startswith("__")]
        assert not private, f"{own}:{line} imports private {', '.join(private)} from {module}"


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_scripts_do_not_import_each_other(path):
    """eval/ and train/ are entry points: their shared code lives in gsched/."""
    for module, _, line in _imports(path):
        assert module.split(".")[0] not in ("eval", "train"), \
            f"{_module_name(path)}:{line} imports {module}; move shared code into gsched/"
