"""What every ``guard`` command shares: the --policy / --state options, the consoles,
and the wrapper that turns errors into a message and an exit code."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console

from guard.cli.render import render_error
from guard.engines import ENGINE_NAMES
from guard.errors import GuardError, codes_for

__all__ = ["BACKEND", "POLICY", "STATE", "guarded", "stderr", "stdout"]

F = TypeVar("F", bound=Callable[..., Any])

POLICY = click.option(
    "--policy",
    "policy",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Policy file (policies/*.yaml).",
)
STATE = click.option(
    "--state",
    "state",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder of the guard's own store (log, history, budgets); overrides the policy's.",
)

BACKEND = click.option(
    "--backend",
    "backend",
    type=click.Choice(ENGINE_NAMES),
    default=None,
    help="Data engine to answer from; overrides the policy's backend: (keeps its options).",
)


def stdout() -> Console:
    return Console(soft_wrap=False, width=max(Console().width, 100))


def stderr() -> Console:
    return Console(stderr=True, soft_wrap=True)


def guarded(command: F) -> F:
    """Turn errors into a message and an exit code; never a traceback."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except GuardError as error:
            render_error(error, kwargs.get("fmt", "table"), stdout(), stderr())
            sys.exit(codes_for(error).exit_code)
        except KeyboardInterrupt:
            sys.exit(130)
        except click.exceptions.Exit:
            raise
        except Exception as exc:  # a bug: say so without a traceback or any data value
            stderr().print(
                f"internal error ({type(exc).__name__}); please report it with the command you ran",
                markup=False,
            )
            sys.exit(2)

    return wrapper  # type: ignore[return-value]
