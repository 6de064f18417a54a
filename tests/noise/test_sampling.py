"""Unit tests of the randomness sources and exact samplers (fast; the statistics are slow)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from guard.noise.sampling import (
    InsecureSeededSource,
    RandomSource,
    SystemRandomSource,
    bernoulli_exp,
    default_grid,
    default_source,
    discrete_laplace,
    discrete_laplace_cdf,
    discrete_laplace_pmf,
    grid_laplace,
    power_of_two_at_most,
    resolve_source,
    round_to_grid,
)


def test_production_source_cannot_be_seeded() -> None:
    with pytest.raises(TypeError):
        SystemRandomSource(42)  # type: ignore[call-arg]
    assert not hasattr(SystemRandomSource(), "seed")
    assert isinstance(default_source(), SystemRandomSource)


@pytest.mark.parametrize("not_a_source", [42, 0, "seed", object()])
def test_a_seed_is_not_accepted_where_a_source_is_expected(not_a_source: object) -> None:
    with pytest.raises(TypeError, match="RandomSource"):
        resolve_source(not_a_source)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="RandomSource"):
        discrete_laplace(Fraction(1), not_a_source)  # type: ignore[arg-type]


def test_none_means_the_secure_default() -> None:
    assert resolve_source(None) is default_source()
    seeded = InsecureSeededSource(1)
    assert resolve_source(seeded) is seeded


def test_seeded_source_is_reproducible_and_system_source_is_not_constant() -> None:
    one, two = InsecureSeededSource(7), InsecureSeededSource(7)
    assert [discrete_laplace(Fraction(50), one) for _ in range(20)] == [
        discrete_laplace(Fraction(50), two) for _ in range(20)
    ]
    assert len({discrete_laplace(Fraction(10**6)) for _ in range(20)}) > 1


@pytest.mark.parametrize("source", [SystemRandomSource(), InsecureSeededSource(0)])
def test_randbelow_rejects_empty_ranges(source: RandomSource) -> None:
    with pytest.raises(ValueError, match="n > 0"):
        source.randbelow(0)


def test_bernoulli_exp_edges() -> None:
    rng = InsecureSeededSource(3)
    assert all(bernoulli_exp(0, 1, rng) for _ in range(100))  # e^0 = 1
    with pytest.raises(ValueError):
        bernoulli_exp(-1, 2, rng)
    with pytest.raises(ValueError):
        bernoulli_exp(1, 0, rng)


@pytest.mark.parametrize("scale", [Fraction(0), Fraction(-1, 2)])
def test_discrete_laplace_rejects_non_positive_scale(scale: Fraction) -> None:
    with pytest.raises(ValueError, match="scale > 0"):
        discrete_laplace(scale, InsecureSeededSource(0))


def test_pmf_sums_to_one_and_matches_cdf() -> None:
    scale = 2.5
    assert sum(discrete_laplace_pmf(z, scale) for z in range(-200, 201)) == pytest.approx(1.0)
    for z in range(-10, 11):
        direct = sum(discrete_laplace_pmf(k, scale) for k in range(-400, z + 1))
        assert discrete_laplace_cdf(z, scale) == pytest.approx(direct)


@pytest.mark.parametrize(
    ("x", "expected"),
    [
        (Fraction(1), Fraction(1)),
        (Fraction(3), Fraction(2)),
        (Fraction(1, 3), Fraction(1, 4)),
        (Fraction(99000, 1024), Fraction(64)),
        (Fraction(1, 1024), Fraction(1, 1024)),
    ],
)
def test_power_of_two_at_most(x: Fraction, expected: Fraction) -> None:
    assert power_of_two_at_most(x) == expected


def test_default_grid_puts_1024_to_2048_steps_in_a_sensitivity() -> None:
    for delta in [Fraction(1), Fraction(99000), Fraction(1, 10), Fraction(123456789, 7)]:
        steps = delta / default_grid(delta)
        assert 1024 <= steps < 2048


def test_round_to_grid_is_exact_half_up() -> None:
    assert round_to_grid(2.5, Fraction(1)) == 3
    assert round_to_grid(-2.5, Fraction(1)) == -2
    assert round_to_grid(0.1, Fraction(1, 10)) == 1


def test_grid_laplace_reports_exact_scale_and_stays_on_the_grid() -> None:
    rng = InsecureSeededSource(11)
    for value in [3300.0, 3300.5, -17.25, 0.0]:
        sample = grid_laplace(value, 99000, 1, rng)
        assert sample.granularity == 64
        assert sample.scale == Fraction(64 * 1547)  # ⌈99000/64⌉ = 1547 grid steps
        assert Fraction(sample.value) % sample.granularity == 0


def test_grid_laplace_with_unit_grid_is_the_geometric_mechanism() -> None:
    sample = grid_laplace(10, 3, Fraction(1, 2), InsecureSeededSource(5), granularity=1)
    assert sample.scale == 6
    assert sample.value == int(sample.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"value": float("nan")}, "value must be finite"),
        ({"sensitivity": 0}, "sensitivity must be > 0"),
        ({"epsilon": 0}, "epsilon must be > 0"),
        ({"granularity": -1}, "granularity must be > 0"),
    ],
)
def test_grid_laplace_rejects_bad_input(kwargs: dict[str, float], message: str) -> None:
    arguments: dict[str, float] = {"value": 1.0, "sensitivity": 1.0, "epsilon": 1.0} | kwargs
    with pytest.raises(ValueError, match=message):
        grid_laplace(rng=InsecureSeededSource(0), **arguments)
