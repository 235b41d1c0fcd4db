"""refimpl.lab.stats: true medians, and bootstrap intervals that cover known values and shrink with n."""
import numpy as np
import pytest

from refimpl.lab import stats


def test_median_even_count_is_mean_of_middle_values():
    assert stats.median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert stats.median([5.0, 1.0, 3.0]) == 3.0
    assert stats.summarize([3.0, 1.0, 2.0, 4.0])["median"] == 2.5


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [float("inf")]])
def test_rejects_empty_and_non_finite(bad):
    with pytest.raises(ValueError):
        stats.median(bad)


def _lognormal(rng, n, scale):
    return scale * np.exp(rng.normal(0.0, 0.1, n))  # median exactly `scale`


def test_ratio_of_medians_covers_true_ratio_about_95_percent_of_the_time():
    rng = np.random.default_rng(1)
    cover = [stats.ratio_of_medians(_lognormal(rng, 20, 2.0), _lognormal(rng, 20, 1.0),
                                    n_boot=500, seed=i).contains(2.0) for i in range(100)]
    assert 0.85 <= np.mean(cover) <= 1.0


def test_ratio_interval_shrinks_with_n():
    rng = np.random.default_rng(1)
    small = stats.ratio_of_medians(_lognormal(rng, 10, 2.0), _lognormal(rng, 10, 1.0), n_boot=2000)
    large = stats.ratio_of_medians(_lognormal(rng, 400, 2.0), _lognormal(rng, 400, 1.0), n_boot=2000)
    assert large.high - large.low < 0.5 * (small.high - small.low)
    assert large.resolved  # 2x is far from 1


def test_same_distribution_is_unresolved():
    rng = np.random.default_rng(2)
    ci = stats.ratio_of_medians(_lognormal(rng, 30, 1.0), _lognormal(rng, 30, 1.0), n_boot=2000)
    assert not ci.resolved and ci.contains(1.0)


def test_paired_difference_and_ratio():
    rng = np.random.default_rng(3)
    base = rng.uniform(1.0, 5.0, 50)  # shared per-pair effect, removed by pairing
    a = base + 0.3 + rng.normal(0, 0.01, 50)
    diff = stats.paired(a, base, n_boot=2000)
    assert diff.contains(0.3) and diff.resolved and diff.high - diff.low < 0.05
    ratio = stats.paired(base * 1.1, base, kind="ratio", n_boot=500)
    assert ratio.estimate == pytest.approx(1.1) and ratio.resolved
    with pytest.raises(ValueError, match="length"):
        stats.paired([1, 2], [1])


def test_fixed_seed_is_reproducible():
    a, b = [1.0, 1.2, 0.9, 1.1], [2.0, 2.1, 1.9, 2.2]
    assert stats.ratio_of_medians(a, b) == stats.ratio_of_medians(a, b)
