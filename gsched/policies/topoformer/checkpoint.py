"""Topoformer checkpoints: model exports (metadata ``kind = "topoformer_model"``), written by
``python -m train.topoformer`` to ``<run_dir>/model``; a run directory stands for its ``model``
export. The default is the small model shipped in ``checkpoints/topoformer_small``; a shipped
checkpoint can also be named instead of given as a path (``"topoformer_mid"``: the mid-size
model, better on graphs of 500 nodes and more; ``checkpoints/MODEL_CARD.md``). Loading
imports orbax (:mod:`gsched.infra.checkpoint`), so it happens on demand, never at import.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax

from gsched.policies.topoformer.decode import MODES
from gsched.policies.topoformer.model import Topoformer, TopoformerConfig

CHECKPOINTS = Path(__file__).parent / "checkpoints"
DEFAULT_CHECKPOINT = CHECKPOINTS / "topoformer_small"
MODEL_KIND = "topoformer_model"  # metadata "kind" of a model export
MODEL_DIR = "model"  # a run directory's model export
SHIPPED = ("topoformer_small", "topoformer_mid")  # names of the shipped checkpoints
TRAIN_HINT = ("train one with `python -m train.topoformer --config "
              "train/configs/topoformer_small.toml --run-dir DIR` and pass "
              f"--checkpoint DIR, or name a shipped one ({', '.join(SHIPPED)})")


def save_model(path: str | Path, model: Topoformer, config: TopoformerConfig,
               extra: dict[str, Any] | None = None) -> None:
    """Exports ``model`` (and its config) as a checkpoint at ``path`` (must not exist)."""
    from gsched.infra.checkpoint import save_checkpoint
    from gsched.infra.config import config_to_dict

    save_checkpoint(path, model, {"kind": MODEL_KIND, "model": config_to_dict(config),
                                  **(extra or {})})


def load_model(path: str | Path) -> tuple[Topoformer, TopoformerConfig]:
    """``(model, config)`` from a model export, a run directory holding one or a shipped
    checkpoint's name; a missing or foreign checkpoint raises ``ValueError`` naming the path
    and how to train one."""
    from gsched.infra.checkpoint import (
        load_checkpoint,
        read_checkpoint_metadata,
        shipped_or_path,
    )
    from gsched.infra.config import config_from_dict

    path = shipped_or_path(path, CHECKPOINTS)
    if (path / MODEL_DIR).is_dir():
        path = path / MODEL_DIR
    if not path.exists():
        raise ValueError(f"Topoformer checkpoint {path} does not exist; {TRAIN_HINT}")
    meta = read_checkpoint_metadata(path)
    if meta.get("kind") != MODEL_KIND:
        raise ValueError(f"{path} is not a Topoformer model export (kind "
                         f"{meta.get('kind')!r}); {TRAIN_HINT}")
    config = config_from_dict(TopoformerConfig, meta["model"], source=str(path))
    model, _ = load_checkpoint(path, Topoformer(config, jax.random.key(0)))
    return model, config


def load(checkpoint: str | Path | None = None, decode: str = "beam") -> tuple[Topoformer,
                                                                             TopoformerConfig]:
    """``(model, config)`` of ``checkpoint`` (default: the shipped one) after checking the
    decoding mode; errors name the problem and how to train a model."""
    if decode not in MODES:
        raise ValueError(f"unknown decode mode {decode!r} for topoformer; expected one of "
                         f"{MODES}")
    if checkpoint is None and not DEFAULT_CHECKPOINT.exists():
        raise ValueError(f"the default Topoformer checkpoint {DEFAULT_CHECKPOINT} is missing; "
                         f"{TRAIN_HINT}")
    return load_model(DEFAULT_CHECKPOINT if checkpoint is None else checkpoint)
