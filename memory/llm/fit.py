"""Fitting an endpoint's vectors to the columns' dimension."""

from __future__ import annotations

from typing import Any

import numpy as np

DEFAULT_EMBED_DIM = 384


def fit_vector(values: Any, dim: int) -> list[float]:
    """Truncate or zero-pad to ``dim`` and L2-normalise (a zero vector stays zero)."""
    vec = np.zeros(dim, dtype=np.float64)
    arr = np.asarray(values, dtype=np.float64).ravel()[:dim]
    vec[: arr.size] = arr
    norm = float(np.linalg.norm(vec))
    if norm > 0:
        vec /= norm
    return [float(x) for x in vec]
