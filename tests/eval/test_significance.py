"""The paired bootstrap: intervals that cover a real difference, exclude none where there is one, and count."""

from __future__ import annotations

import pytest

from saga_dspy.eval.scoring.significance import paired_bootstrap, paired_by_id, set_bootstrap


def test_a_consistent_gain_has_an_interval_above_zero_and_counts_its_wins():
    a = [0.0, 0.5, 0.2, 1.0, 0.0, 0.3] * 5
    b = [x + 0.2 if x < 0.9 else x for x in a]
    c = paired_bootstrap(a, b)
    assert c.n == 30 and c.ties == 5 and c.wins == 25 and c.losses == 0
    assert c.delta == pytest.approx(sum(y - x for x, y in zip(a, b)) / 30)
    assert 0 < c.low <= c.delta <= c.high


def test_noise_around_zero_gives_an_interval_that_spans_zero_and_is_seeded():
    a = [1.0, 0.0] * 10
    b = [0.0, 1.0] * 10
    c = paired_bootstrap(a, b)
    assert c.delta == 0 and c.low < 0 < c.high and c.wins == c.losses == 10
    assert paired_bootstrap(a, b) == c
    assert "+0.0 [" in c.describe() and "10 wins, 10 losses, 0 ties" in c.describe()


def test_pairs_by_question_id_and_refuses_unpaired_lists():
    c = paired_by_id({"q1": 0.0, "q2": 1.0, "q3": 0.5}, {"q2": 1.0, "q1": 1.0, "q9": 0.0})
    assert c.n == 2 and c.wins == 1 and c.ties == 1
    with pytest.raises(ValueError, match="same questions"):
        paired_bootstrap([1.0], [1.0, 0.0])
    assert paired_bootstrap([], []).n == 0


def test_two_question_sets_of_different_sizes_are_each_resampled_within_themselves():
    """A dev split against a test split: a real difference keeps its interval off zero, a small dev split widens it."""
    test = [1.0, 0.0, 0.0, 1.0, 0.0] * 40  # mean 0.4, n = 200
    c = set_bootstrap([1.0, 1.0, 0.0, 1.0] * 50, test)  # mean 0.75
    assert (c.n_a, c.n_b) == (200, 200) and c.delta == pytest.approx(0.35) and 0 < c.low < c.delta < c.high
    small = set_bootstrap([1.0, 1.0, 0.0, 1.0] * 3, test)
    assert small.delta == pytest.approx(0.35) and small.high - small.low > c.high - c.low
    assert set_bootstrap([1.0, 0.0] * 10, test[:20]) == set_bootstrap([1.0, 0.0] * 10, test[:20])  # seeded
    with pytest.raises(ValueError):
        set_bootstrap([], test)


def test_the_interval_is_the_hand_written_paired_percentile_bootstrap():
    """scipy's bootstrap gives what the hand-written one gave (numpy's resampled question indices, linear
    quantiles): earlier tables stay comparable; one question has the interval of its difference; counts read right."""
    import numpy as np

    a = [0.0, 0.5, 0.2, 1.0, 0.0, 0.3, 0.9, 0.1] * 3
    b = [0.4, 0.5, 0.0, 1.0, 0.7, 0.3, 0.2, 0.6] * 3
    diff = np.asarray(b) - np.asarray(a)
    idx = np.random.default_rng(0).integers(0, len(diff), size=(10_000, len(diff)))
    low, high = np.quantile(diff[idx].mean(axis=1), [0.025, 0.975])
    c = paired_bootstrap(a, b)
    assert (c.low, c.high) == pytest.approx((low, high), abs=1e-12)
    one = paired_bootstrap([0.2], [0.7])
    assert (one.low, one.delta, one.high) == pytest.approx((0.5, 0.5, 0.5))
    assert "1 win, 0 losses, 0 ties" in one.describe()
    assert "0 wins, 1 loss, 1 tie)" in paired_bootstrap([1.0, 0.5], [0.0, 0.5]).describe()
