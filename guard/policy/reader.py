"""The strict reader of a policy document: every value checked for its type, every
problem reported as ``file: key.path: message`` with what to write instead."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from typing import Any

from guard.errors import PolicyError
from guard.policy.credentials import ScramVerifier, parse_verifier
from guard.policy.epsilon import as_epsilon
from guard.policy.model import NoiseMode

__all__ = ["NAME", "Reader", "did_you_mean", "kind_of"]

#: table, column and analyst names: plain SQL identifiers
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Reader:
    """Walks a parsed YAML document, remembering the key path for error messages."""

    def __init__(self, file_name: str) -> None:
        self.file_name = file_name
        self.path: list[str] = []

    def fail(self, message: str, key: str | None = None) -> PolicyError:
        where = ".".join([*self.path, key] if key else self.path) or "(top level)"
        return PolicyError(f"{self.file_name}: {where}: {message}")

    @contextmanager
    def at(self, key: str) -> Iterator[None]:
        self.path.append(key)
        try:
            yield
        finally:
            self.path.pop()

    def mapping(self, value: Any, allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> dict[str, Any]:
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise self.fail(f"expected a mapping, got {kind_of(value)}")
        for key in value:
            if not isinstance(key, str):
                raise self.fail(f"keys must be names, got {key!r}")
            if key not in allowed:
                hint = did_you_mean(key, allowed)
                raise self.fail(f"unknown key{hint}; allowed keys: {', '.join(allowed)}", key)
        for key in required:
            if key not in value:
                raise self.fail("is required", key)
        return value

    def string(self, value: Any, key: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(f"expected a non-empty string, got {kind_of(value)}", key)
        return value

    def name(self, value: Any, key: str) -> str:
        text = self.string(value, key)
        if not NAME.match(text):
            raise self.fail(f"{text!r} is not a plain SQL name (letters, digits, _)", key)
        return text

    def integer(self, value: Any, key: str, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"expected a whole number, got {kind_of(value)}", key)
        if value < minimum:
            raise self.fail(f"must be at least {minimum}, got {value}", key)
        return value

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(f"expected true or false, got {kind_of(value)}", key)
        return value

    def number(self, value: Any, key: str, minimum: float, maximum: float | None) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(f"expected a number, got {kind_of(value)}", key)
        if value < minimum or (maximum is not None and value > maximum):
            upper = "" if maximum is None else f" and at most {maximum:g}"
            raise self.fail(f"must be at least {minimum:g}{upper}, got {value:g}", key)
        return float(value)

    def choice(self, value: Any, key: str, choices: tuple[str, ...]) -> str:
        if not isinstance(value, str) or value not in choices:
            hint = did_you_mean(value, choices) if isinstance(value, str) else ""
            raise self.fail(f"expected one of {', '.join(choices)}{hint}", key)
        return value

    def epsilon(self, value: Any, key: str) -> Fraction:
        """A positive ε: a number, or a decimal / fraction string such as "1/3"."""
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise self.fail(f"expected a positive number (an ε), got {kind_of(value)}", key)
        try:
            return as_epsilon(value)
        except ValueError:
            raise self.fail(f"expected a positive number (an ε), got {value!r}", key) from None

    def verifier(self, value: Any, key: str) -> ScramVerifier:
        """A SCRAM-SHA-256 verifier (never a plain password: the message does not echo it)."""
        if not isinstance(value, str):
            raise self.fail(f"expected a SCRAM-SHA-256 verifier string, got {kind_of(value)}", key)
        try:
            return parse_verifier(value)
        except ValueError as error:
            raise self.fail(str(error), key) from None

    def noise_mode(self, value: Any, key: str) -> NoiseMode:
        if isinstance(value, bool):  # YAML reads a bare off / on / no as a boolean
            return NoiseMode.NOISE if value else NoiseMode.OFF
        return NoiseMode(self.choice(value, key, tuple(m.value for m in NoiseMode)))

    def bounds(self, value: Any, key: str) -> tuple[float, float]:
        if (
            not isinstance(value, list)
            or len(value) != 2
            or any(isinstance(v, bool) or not isinstance(v, int | float) for v in value)
        ):
            raise self.fail("expected [low, high]", key)
        low, high = float(value[0]), float(value[1])
        if not low <= high:
            raise self.fail("expected [low, high] with low <= high", key)
        return low, high


def kind_of(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", type(None): "nothing"}.get(
        type(value), type(value).__name__
    )


def did_you_mean(word: str, choices: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
