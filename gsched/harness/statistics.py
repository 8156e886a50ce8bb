"""Small statistics shared by the result studies (``headroom``, ``seed_control``)."""

from __future__ import annotations

import numpy as np


def bootstrap_interval(values: np.ndarray, rng: np.random.Generator, draws: int = 10_000
                       ) -> tuple[float, float]:
    """95 % bootstrap interval of the mean of ``values [G]`` (``draws`` resamples of ``G``)."""
    means = rng.choice(values, (draws, len(values))).mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))
