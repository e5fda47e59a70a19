"""Statistics behind the evaluation tables: Wilson intervals, mean ± std, and bootstraps.

The bootstraps compare two runs question by question (``a[i]`` and ``b[i]`` score the same
question, e.g. 1.0/0.0 judge labels). All resampling uses ``numpy.random.default_rng(seed)``, so a
result is a pure function of its inputs and seed. Confidence intervals are percentile intervals
(``numpy.quantile``, linear interpolation) of the resampled differences.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from qemem.errors import InputError

__all__ = [
    "BootstrapResult",
    "cluster_bootstrap",
    "cluster_bootstrap_gap",
    "gap_difference",
    "leave_one_cluster_out",
    "leave_one_cluster_out_gap",
    "mean_std",
    "paired_bootstrap",
    "wilson_interval",
]

_CHUNK = 1_000  # resamples drawn at a time, bounding memory to ~ _CHUNK * n indices

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class BootstrapResult:
    """Observed ``mean(a) - mean(b)`` with a bootstrap percentile interval.

    ``p_value`` is the share of resamples whose difference does not have the observed sign
    (``<= 0`` when the observed difference is positive, ``>= 0`` when negative; 1.0 when the
    observed difference is 0): a one-sided bootstrap p-value for "the sign is real". Resamples
    that tie at exactly 0 count against the observed sign, which makes it conservative.
    """

    difference: float
    ci_low: float
    ci_high: float
    p_value: float
    confidence: float
    n_resamples: int
    seed: int
    unit: str  # "question" or "cluster": what was resampled
    n_units: int


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for ``successes`` out of ``n``; ``(0.0, 1.0)`` when ``n == 0``.

    ``n == 0`` carries no information, so the interval is the whole range rather than an error.
    """
    if n < 0 or not 0 <= successes <= n:
        raise InputError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if not z > 0:
        raise InputError(f"z must be positive, got {z}")
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return (max(0.0, centre - half), min(1.0, centre + half))


def _as_array(values: Sequence[float], name: str) -> FloatArray:
    """Values as a finite, non-empty 1-D float array."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise InputError(f"{name} must be a non-empty sequence of numbers, got {array.size}")
    if not np.all(np.isfinite(array)):
        raise InputError(f"{name} contains NaN or infinite values; score every question first")
    return array


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof=1) of ``values``; std 0.0 for one value."""
    array = _as_array(values, "values")
    std = float(array.std(ddof=1)) if array.size > 1 else 0.0
    return (float(array.mean()), std)


def _paired_differences(a: Sequence[float], b: Sequence[float]) -> FloatArray:
    """Per-question ``a - b`` after checking both runs cover the same questions."""
    left, right = _as_array(a, "a"), _as_array(b, "b")
    if left.size != right.size:
        raise InputError(
            f"runs differ in length ({left.size} vs {right.size}); "
            "compare runs over the same questions in the same order"
        )
    return left - right


def _check_resampling(n_resamples: int, confidence: float) -> None:
    if n_resamples < 1:
        raise InputError(f"n_resamples must be at least 1, got {n_resamples}")
    if not 0 < confidence < 1:
        raise InputError(f"confidence must lie strictly between 0 and 1, got {confidence}")


def _summarise(
    observed: float,
    resampled: FloatArray,
    *,
    confidence: float,
    seed: int,
    unit: str,
    n_units: int,
) -> BootstrapResult:
    """Percentile interval and sign-flip share of the resampled differences."""
    alpha = (1 - confidence) / 2
    low, high = np.quantile(resampled, [alpha, 1 - alpha])
    if observed > 0:
        p_value = float(np.mean(resampled <= 0))
    elif observed < 0:
        p_value = float(np.mean(resampled >= 0))
    else:
        p_value = 1.0
    return BootstrapResult(
        difference=observed,
        ci_low=float(low),
        ci_high=float(high),
        p_value=p_value,
        confidence=confidence,
        n_resamples=int(resampled.size),
        seed=seed,
        unit=unit,
        n_units=n_units,
    )


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> BootstrapResult:
    """Paired bootstrap of ``mean(a) - mean(b)``, resampling question indices jointly."""
    _check_resampling(n_resamples, confidence)
    diff = _paired_differences(a, b)
    rng = np.random.default_rng(seed)
    n = diff.size
    resampled = np.empty(n_resamples, dtype=np.float64)
    for start in range(0, n_resamples, _CHUNK):
        size = min(_CHUNK, n_resamples - start)
        indices = rng.integers(0, n, size=(size, n))
        resampled[start : start + size] = diff[indices].mean(axis=1)
    return _summarise(
        float(diff.mean()),
        resampled,
        confidence=confidence,
        seed=seed,
        unit="question",
        n_units=n,
    )


def _cluster_index(
    diff: FloatArray, clusters: Sequence[str]
) -> tuple[list[str], npt.NDArray[np.intp]]:
    """Sorted cluster names and, per question, the index of its cluster among them."""
    labels = [str(label) for label in clusters]
    if len(labels) != diff.size:
        raise InputError(
            f"got {len(labels)} cluster labels for {diff.size} questions; "
            "give one conversation id per question"
        )
    names, inverse = np.unique(np.asarray(labels, dtype=object), return_inverse=True)
    if names.size < 2:
        raise InputError(
            f"cluster analyses need at least two conversations, got {names.size}; "
            "use paired_bootstrap for a single conversation"
        )
    return [str(name) for name in names], inverse.astype(np.intp)


def cluster_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    clusters: Sequence[str],
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> BootstrapResult:
    """Cluster bootstrap of ``mean(a) - mean(b)`` with conversations as resampling units.

    Each resample draws as many clusters as there are, with replacement, and takes the mean
    difference over all questions of the drawn clusters (a cluster drawn twice counts twice).
    Clusters are ordered by name, so the result does not depend on question order.
    """
    _check_resampling(n_resamples, confidence)
    diff = _paired_differences(a, b)
    names, inverse = _cluster_index(diff, clusters)
    sums = np.bincount(inverse, weights=diff, minlength=len(names))
    counts = np.bincount(inverse, minlength=len(names)).astype(np.float64)
    rng = np.random.default_rng(seed)
    k = sums.size
    resampled = np.empty(n_resamples, dtype=np.float64)
    for start in range(0, n_resamples, _CHUNK):
        size = min(_CHUNK, n_resamples - start)
        indices = rng.integers(0, k, size=(size, k))
        resampled[start : start + size] = sums[indices].sum(axis=1) / counts[indices].sum(axis=1)
    return _summarise(
        float(diff.mean()),
        resampled,
        confidence=confidence,
        seed=seed,
        unit="cluster",
        n_units=k,
    )


def leave_one_cluster_out(
    a: Sequence[float], b: Sequence[float], clusters: Sequence[str]
) -> dict[str, float]:
    """``mean(a) - mean(b)`` over all questions outside each cluster, keyed by cluster name."""
    diff = _paired_differences(a, b)
    names, inverse = _cluster_index(diff, clusters)
    return {name: float(diff[inverse != k].mean()) for k, name in enumerate(names)}


# ---------------------------------------------------------------------------- group gaps


def _groups(diff: FloatArray, high: Sequence[bool]) -> npt.NDArray[np.bool_]:
    """``high`` as a boolean array aligned with ``diff``; both groups must be non-empty."""
    flags = np.asarray([bool(h) for h in high], dtype=bool)
    if flags.size != diff.size:
        raise InputError(f"got {flags.size} group flags for {diff.size} questions")
    if flags.all() or not flags.any():
        raise InputError(
            "a gap difference needs questions in both the high and the low group; "
            f"got {int(flags.sum())} high and {int((~flags).sum())} low"
        )
    return flags


def gap_difference(a: Sequence[float], b: Sequence[float], high: Sequence[bool]) -> float:
    """How much larger the ``a - b`` gap is on the high-complexity questions than on the low
    ones: ``mean(a - b | high) - mean(a - b | low)``, ``high[i]`` flagging question ``i``."""
    diff = _paired_differences(a, b)
    flags = _groups(diff, high)
    return float(diff[flags].mean() - diff[~flags].mean())


def cluster_bootstrap_gap(
    a: Sequence[float],
    b: Sequence[float],
    high: Sequence[bool],
    clusters: Sequence[str],
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> BootstrapResult:
    """Conversation-cluster bootstrap of :func:`gap_difference`: each resample draws as many
    conversations as there are, with replacement, and recomputes both groups' mean gaps over
    all questions of the drawn conversations. Resamples that leave one group empty carry no
    value and are dropped (``n_resamples`` of the result counts those kept)."""
    _check_resampling(n_resamples, confidence)
    diff = _paired_differences(a, b)
    flags = _groups(diff, high)
    names, inverse = _cluster_index(diff, clusters)
    k = len(names)
    sums_high = np.bincount(inverse, weights=np.where(flags, diff, 0.0), minlength=k)
    sums_low = np.bincount(inverse, weights=np.where(flags, 0.0, diff), minlength=k)
    n_high = np.bincount(inverse, weights=flags.astype(np.float64), minlength=k)
    n_low = np.bincount(inverse, weights=(~flags).astype(np.float64), minlength=k)
    rng = np.random.default_rng(seed)
    resampled = np.empty(n_resamples, dtype=np.float64)
    for start in range(0, n_resamples, _CHUNK):
        size = min(_CHUNK, n_resamples - start)
        idx = rng.integers(0, k, size=(size, k))
        high_n, low_n = n_high[idx].sum(axis=1), n_low[idx].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            gaps = sums_high[idx].sum(axis=1) / high_n - sums_low[idx].sum(axis=1) / low_n
        resampled[start : start + size] = np.where((high_n > 0) & (low_n > 0), gaps, np.nan)
    kept = resampled[np.isfinite(resampled)]
    if kept.size == 0:
        raise InputError("no resample held questions of both groups; add conversations")
    observed = float(diff[flags].mean() - diff[~flags].mean())
    return _summarise(observed, kept, confidence=confidence, seed=seed, unit="cluster", n_units=k)


def leave_one_cluster_out_gap(
    a: Sequence[float], b: Sequence[float], high: Sequence[bool], clusters: Sequence[str]
) -> dict[str, float | None]:
    """:func:`gap_difference` over all questions outside each conversation, keyed by its
    name; None where leaving it out empties a group."""
    diff = _paired_differences(a, b)
    flags = _groups(diff, high)
    names, inverse = _cluster_index(diff, clusters)
    out: dict[str, float | None] = {}
    for k, name in enumerate(names):
        keep = inverse != k
        hi, lo = diff[keep & flags], diff[keep & ~flags]
        out[name] = float(hi.mean() - lo.mean()) if hi.size and lo.size else None
    return out
