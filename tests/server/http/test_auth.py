"""Bearer tokens and passwords against the policy's SCRAM verifiers, and what each costs."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

import guard.server.auth as auth_module
from guard.policy.credentials import ScramVerifier
from guard.policy.load import load_policy
from guard.policy.model import Policy
from guard.server.auth import Authenticator
from tests.server.http.conftest import POLICIES


@pytest.fixture
def policy() -> Policy:
    return load_policy(POLICIES / "students.yaml")


@pytest.fixture
def verifies(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[ScramVerifier]]:
    """Every verifier checked (each check is one PBKDF2 run)."""
    checked: list[ScramVerifier] = []
    real = auth_module.verify_password

    def counting(verifier: ScramVerifier, password: str) -> bool:
        checked.append(verifier)
        return real(verifier, password)

    monkeypatch.setattr(auth_module, "verify_password", counting)
    yield checked


def test_token_is_the_analysts_password(policy: Policy) -> None:
    auth = Authenticator(policy)
    alice, bob = auth.analyst_for_token("alice-demo"), auth.analyst_for_token("bob-demo")
    assert alice is not None and alice.name == "alice"
    assert bob is not None and bob.name == "bob"
    for wrong in ("alice", "ALICE-DEMO", "alice-demo ", "", "bob-demo\n"):
        assert auth.analyst_for_token(wrong) is None, wrong


def test_a_verified_token_costs_no_second_verification(policy: Policy, verifies: list[ScramVerifier]) -> None:
    auth = Authenticator(policy)
    assert auth.analyst_for_token("bob-demo") is not None
    assert len(verifies) == 2  # every analyst is checked once, so the time does not tell whose it is
    for _ in range(5):
        assert auth.analyst_for_token("bob-demo") is not None
    assert len(verifies) == 2


def test_an_unknown_token_costs_one_verification_per_analyst_once(
    policy: Policy, verifies: list[ScramVerifier]
) -> None:
    auth = Authenticator(policy)
    assert auth.analyst_for_token("guess-1") is None
    assert len(verifies) == len(policy.analysts)
    for _ in range(5):
        assert auth.analyst_for_token("guess-1") is None
    assert len(verifies) == len(policy.analysts)


def test_the_failed_token_memory_is_bounded(policy: Policy, verifies: list[ScramVerifier]) -> None:
    auth = Authenticator(policy, cache_size=2)
    for guess in ("g1", "g2", "g3", "g1"):  # g1 was evicted by g3: checked again
        auth.analyst_for_token(guess)
    assert len(verifies) == 4 * len(policy.analysts)


def test_a_password_shared_by_two_analysts_identifies_neither(policy: Policy) -> None:
    alice, bob = policy.analysts
    shared = dataclasses.replace(policy, analysts=(alice, dataclasses.replace(bob, password=alice.password)))
    assert Authenticator(shared).analyst_for_token("alice-demo") is None


def test_analysts_without_a_password_cannot_log_in(policy: Policy) -> None:
    alice, bob = policy.analysts
    auth = Authenticator(
        dataclasses.replace(policy, analysts=(alice, dataclasses.replace(bob, password=None)))
    )
    assert auth.analyst_for_token("bob-demo") is None
    assert auth.analyst_for_password("bob", "bob-demo") is None


def test_name_and_password(policy: Policy, verifies: list[ScramVerifier]) -> None:
    auth = Authenticator(policy)
    found = auth.analyst_for_password("alice", "alice-demo")
    assert found is not None and found.name == "alice"
    assert auth.analyst_for_password("alice", "bob-demo") is None
    assert auth.analyst_for_password("bob", "alice-demo") is None
    assert len(verifies) == 3
    # an unknown name still costs one verification, so it cannot be told from a wrong password
    assert auth.analyst_for_password("mallory", "alice-demo") is None
    assert len(verifies) == 4
    assert auth.analyst_for_password("alice", "alice-demo") is not None
    assert len(verifies) == 4


def test_tokens_are_not_kept_in_memory(policy: Policy) -> None:
    auth = Authenticator(policy)
    auth.analyst_for_token("alice-demo")
    auth.analyst_for_token("a-wrong-guess")
    kept = repr(vars(auth._verified)) + repr(vars(auth._failed))
    assert "alice-demo" not in kept and "a-wrong-guess" not in kept
