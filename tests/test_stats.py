"""Hand-computed checks of the evaluation statistics."""

from __future__ import annotations

import math

import pytest

from qemem.errors import InputError
from qemem.eval.stats import (
    cluster_bootstrap,
    leave_one_cluster_out,
    mean_std,
    paired_bootstrap,
    wilson_interval,
)

# ---------------------------------------------------------------- wilson_interval
# Wilson: centre = (p + z²/2n) / (1 + z²/n), half = z/(1 + z²/n) * sqrt(p(1-p)/n + z²/4n²)


def test_wilson_exact_small_case() -> None:
    # 1 of 4, z = 1: p = 1/4, z²/n = 1/4, denom = 5/4
    # centre = (1/4 + 1/8) / (5/4) = 3/10
    # half = (4/5) * sqrt(3/64 + 1/64) = (4/5) * (1/4) = 1/5 -> (0.1, 0.5)
    low, high = wilson_interval(1, 4, z=1.0)
    assert low == pytest.approx(0.1, abs=1e-12)
    assert high == pytest.approx(0.5, abs=1e-12)


def test_wilson_zero_successes() -> None:
    # 0 of 10: z² = 3.8416, z²/n = 0.38416, denom = 1.38416
    # centre = 0.19208 / 1.38416 = 0.138770; half = 1.96/1.38416 * sqrt(3.8416/400)
    #        = 1.416021 * 0.0980 = 0.138770 -> (0, 0.277540)
    low, high = wilson_interval(0, 10)
    assert low == 0.0
    assert high == pytest.approx(0.277540, abs=1e-4)


def test_wilson_half() -> None:
    # 5 of 10: centre = (0.5 + 0.19208)/1.38416 = 0.5
    # half = 1.416021 * sqrt(0.025 + 0.009604) = 1.416021 * 0.186022 = 0.263410
    low, high = wilson_interval(5, 10)
    assert low == pytest.approx(0.236590, abs=1e-4)
    assert high == pytest.approx(0.763410, abs=1e-4)


def test_wilson_all_successes_mirrors_zero() -> None:
    # by symmetry, 10 of 10 is (1 - 0.277540, 1)
    low, high = wilson_interval(10, 10)
    assert low == pytest.approx(0.722460, abs=1e-4)
    assert high == 1.0


def test_wilson_large_n() -> None:
    # 841 of 1000: roots of (1 + z²/n) p² - (2p̂ + z²/n) p + p̂² = 0 with p̂ = 0.841
    # A = 1.0038416, B = -1.6858416, C = 0.707281
    # p = (1.6858416 ∓ sqrt(B² - 4AC)) / 2A = (1.6858416 ∓ 0.0454922) / 2.0076832
    #   -> (0.817036, 0.862354)
    low, high = wilson_interval(841, 1000)
    assert low == pytest.approx(0.817036, abs=1e-4)
    assert high == pytest.approx(0.862354, abs=1e-4)


def test_wilson_no_trials_is_whole_range() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize(
    ("successes", "n", "z"), [(-1, 5, 1.96), (6, 5, 1.96), (0, -1, 1.96), (1, 2, 0.0)]
)
def test_wilson_rejects_bad_input(successes: int, n: int, z: float) -> None:
    with pytest.raises(InputError):
        wilson_interval(successes, n, z)


# ---------------------------------------------------------------- mean_std


def test_mean_std_sample_std() -> None:
    # mean 2.5; squared deviations 2.25 + 0.25 + 0.25 + 2.25 = 5; / (n-1) = 5/3
    mean, std = mean_std([1.0, 2.0, 3.0, 4.0])
    assert mean == pytest.approx(2.5)
    assert std == pytest.approx(math.sqrt(5 / 3))


def test_mean_std_single_value_has_zero_std() -> None:
    assert mean_std([0.6]) == (0.6, 0.0)


@pytest.mark.parametrize("values", [[], [1.0, float("nan")], [float("inf")]])
def test_mean_std_rejects_empty_and_non_finite(values: list[float]) -> None:
    with pytest.raises(InputError):
        mean_std(values)


# ---------------------------------------------------------------- paired_bootstrap


def _half_better() -> tuple[list[float], list[float]]:
    # a right on all 200 questions, b right on the first 100: per-question difference is 0 or 1
    # with mean 0.5 and bootstrap SE sqrt(0.25/200) = 0.0354 -> 95% CI about 0.5 ± 0.069
    return [1.0] * 200, [1.0] * 100 + [0.0] * 100


def test_paired_bootstrap_contains_true_difference() -> None:
    a, b = _half_better()
    result = paired_bootstrap(a, b, seed=7)
    assert result.difference == 0.5
    assert 0.40 < result.ci_low < 0.47
    assert 0.53 < result.ci_high < 0.60
    assert result.p_value == 0.0  # no resample of 200 draws comes near a difference of 0
    assert (result.unit, result.n_units, result.n_resamples) == ("question", 200, 10_000)
    assert (result.seed, result.confidence) == (7, 0.95)


def test_paired_bootstrap_is_deterministic_for_a_seed() -> None:
    a, b = _half_better()
    first = paired_bootstrap(a, b, seed=3, n_resamples=2_500)
    assert paired_bootstrap(a, b, seed=3, n_resamples=2_500) == first
    assert paired_bootstrap(a, b, seed=4, n_resamples=2_500) != first


def test_paired_bootstrap_swapped_runs_mirror() -> None:
    # same seed -> same resampled indices -> every resampled difference negated
    a, b = _half_better()
    forward = paired_bootstrap(a, b, seed=1)
    backward = paired_bootstrap(b, a, seed=1)
    assert backward.difference == -0.5
    assert backward.ci_low == pytest.approx(-forward.ci_high)
    assert backward.ci_high == pytest.approx(-forward.ci_low)
    assert backward.p_value == forward.p_value


def test_paired_bootstrap_identical_runs() -> None:
    a = [1.0, 0.0, 1.0, 1.0, 0.0]
    result = paired_bootstrap(a, list(a))
    assert (result.difference, result.ci_low, result.ci_high) == (0.0, 0.0, 0.0)
    assert result.p_value == 1.0


def test_paired_bootstrap_constant_shift_has_point_interval() -> None:
    # every question differs by exactly 0.25 -> every resample mean is 0.25
    result = paired_bootstrap([0.5, 0.75, 1.0], [0.25, 0.5, 0.75])
    assert result.ci_low == pytest.approx(0.25)
    assert result.ci_high == pytest.approx(0.25)
    assert result.p_value == 0.0


@pytest.mark.parametrize(
    ("a", "b", "kwargs"),
    [
        ([1.0, 0.0], [1.0], {}),
        ([], [], {}),
        ([1.0], [float("nan")], {}),
        ([1.0], [0.0], {"n_resamples": 0}),
        ([1.0], [0.0], {"confidence": 1.0}),
    ],
)
def test_paired_bootstrap_rejects_bad_input(
    a: list[float], b: list[float], kwargs: dict[str, float]
) -> None:
    with pytest.raises(InputError):
        paired_bootstrap(a, b, **kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------- cluster_bootstrap


def _two_conversations() -> tuple[list[float], list[float], list[str]]:
    # conv "x": differences [-1, 0] (sum -1, 2 questions, mean -0.5)
    # conv "y": differences [1, 1, 1, 1] (sum 4, 4 questions, mean 1)
    # interleaved on purpose: clusters are found by label, not position
    a = [0.0, 1.0, 1.0, 0.0, 1.0, 1.0]
    b = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    clusters = ["x", "y", "y", "x", "y", "y"]
    return a, b, clusters


def test_cluster_bootstrap_two_clusters_by_hand() -> None:
    # observed: (-1 + 4) / 6 = 0.5
    # resamples of 2 clusters: (x, x) -> -2/4 = -0.5 with prob 1/4; (x, y) or (y, x) -> 3/6 = 0.5
    # with prob 1/2; (y, y) -> 8/8 = 1 with prob 1/4. Each end holds ~25% of the mass, so the
    # 2.5% and 97.5% quantiles are exactly -0.5 and 1.0; P(diff <= 0) = P(x, x) = 1/4
    a, b, clusters = _two_conversations()
    result = cluster_bootstrap(a, b, clusters, seed=11)
    assert result.difference == 0.5
    assert (result.ci_low, result.ci_high) == (-0.5, 1.0)
    assert result.p_value == pytest.approx(0.25, abs=0.02)
    assert (result.unit, result.n_units) == ("cluster", 2)


def test_cluster_bootstrap_ignores_question_order() -> None:
    a, b, clusters = _two_conversations()
    order = [5, 3, 1, 0, 4, 2]
    shuffled = cluster_bootstrap(
        [a[i] for i in order], [b[i] for i in order], [clusters[i] for i in order], seed=2
    )
    assert shuffled == cluster_bootstrap(a, b, clusters, seed=2)


def test_cluster_bootstrap_identical_runs() -> None:
    a = [1.0, 0.0, 1.0, 0.0]
    result = cluster_bootstrap(a, list(a), ["p", "p", "q", "r"])
    assert (result.difference, result.ci_low, result.ci_high, result.p_value) == (0, 0, 0, 1)


def test_cluster_bootstrap_needs_two_clusters_and_one_label_per_question() -> None:
    with pytest.raises(InputError, match="at least two conversations"):
        cluster_bootstrap([1.0, 0.0], [0.0, 0.0], ["c", "c"])
    with pytest.raises(InputError, match="cluster labels"):
        cluster_bootstrap([1.0, 0.0], [0.0, 0.0], ["c"])


# ---------------------------------------------------------------- leave_one_cluster_out


def test_leave_one_cluster_out_by_hand() -> None:
    # per-question differences and clusters:
    #   A: [1, 0]   B: [0]   C: [-1, 1, 1]   (interleaved below)
    # without A: [0, -1, 1, 1] -> 1/4; without B: [1, 0, -1, 1, 1] -> 2/5;
    # without C: [1, 0, 0] -> 1/3
    a = [1.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    b = [1.0, 1.0, 0.0, 1.0, 0.0, 0.0]
    clusters = ["B", "C", "A", "A", "C", "C"]
    # differences: B 0, C -1, A 1, A 0, C 1, C 1
    result = leave_one_cluster_out(a, b, clusters)
    assert list(result) == ["A", "B", "C"]
    assert result["A"] == pytest.approx(1 / 4)
    assert result["B"] == pytest.approx(2 / 5)
    assert result["C"] == pytest.approx(1 / 3)


def test_leave_one_cluster_out_rejects_single_cluster() -> None:
    with pytest.raises(InputError, match="at least two conversations"):
        leave_one_cluster_out([1.0], [0.0], ["only"])
