"""``guard serve`` (the PostgreSQL and HTTP endpoints) and ``guard password`` (a verifier
for a policy's ``analysts.NAME.password``).

Thin: the endpoints live in :mod:`guard.server`. The limits and the login throttle are
options made from their declarations (:mod:`guard.server.limits`,
:mod:`guard.server.throttle`), so ``--help`` shows the defaults the server uses. Exit
codes: 0 stopped by SIGINT/SIGTERM, 2 usage, policy, state or listening error (port in
use, bad certificate).
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import click

from guard.cli.options import BACKEND, POLICY, STATE, guarded
from guard.core import Guard
from guard.policy.credentials import DEFAULT_ITERATIONS, make_verifier
from guard.server.limits import ServeLimits, option_name
from guard.server.listen import is_loopback, tls_context
from guard.server.serve import Endpoints, freeze_start_up
from guard.server.serve import serve as serve_endpoints
from guard.server.serverlog import server_logging
from guard.server.throttle import ThrottleSettings

__all__ = ["password", "serve"]

_ROUTES = "POST /query, GET /budget, GET /log, GET /health; schema at /docs"
#: the settings dataclasses whose fields are options, and the prefix of their parameters
_SETTINGS: tuple[tuple[type[Any], str], ...] = ((ServeLimits, "limit_"), (ThrottleSettings, "login_"))

F = TypeVar("F", bound=Callable[..., Any])


def _setting_options(command: F) -> F:
    """One option per field of each settings dataclass, its default the field's."""
    for cls, prefix in reversed(_SETTINGS):
        for spec in reversed(dataclasses.fields(cls)):
            number = type(spec.default)
            kind = (
                click.IntRange(min=int(spec.metadata["minimum"]))
                if number is int
                else click.FloatRange(min=spec.metadata["minimum"])
            )
            command = click.option(
                option_name(spec.metadata),
                prefix + spec.name,
                type=kind,
                default=spec.default,
                show_default=True,
                help=spec.metadata["help"],
            )(command)
    return command


def _settings(cls: type[Any], prefix: str, values: Mapping[str, Any]) -> Any:
    return cls(**{spec.name: values[prefix + spec.name] for spec in dataclasses.fields(cls)})


@click.command("serve")
@POLICY
@STATE
@BACKEND
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address both endpoints listen on; anything but loopback wants --tls-cert/--tls-key.",
)
@click.option(
    "--pg-port",
    type=click.IntRange(0, 65535),
    default=5433,
    show_default=True,
    help="PostgreSQL endpoint's port (0: any free one).",
)
@click.option(
    "--http-port",
    type=click.IntRange(0, 65535),
    default=8080,
    show_default=True,
    help="HTTP API's port (0: any free one).",
)
@click.option(
    "--tls-cert",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="PEM certificate: both endpoints speak TLS (PostgreSQL sslmode=require, https).",
)
@click.option(
    "--tls-key",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The certificate's key (PEM).",
)
@click.option(
    "--allow-plaintext-loopback",
    is_flag=True,
    help="With --tls-cert: also accept plaintext PostgreSQL logins and plain HTTP from loopback "
    "clients (127.0.0.0/8, ::1); everyone else must still use TLS.",
)
@click.option("--no-pg", is_flag=True, help="Do not start the PostgreSQL endpoint.")
@click.option("--no-http", is_flag=True, help="Do not start the HTTP API.")
@_setting_options
def serve(
    policy: Path,
    state: Path | None,
    backend: str | None,
    host: str,
    pg_port: int,
    http_port: int,
    tls_cert: Path | None,
    tls_key: Path | None,
    allow_plaintext_loopback: bool,
    no_pg: bool,
    no_http: bool,
    **settings: Any,
) -> None:
    """Serve POLICY to analysts over the PostgreSQL protocol (psql, JDBC, pandas) and an
    HTTP API, until Ctrl-C or SIGTERM. Analysts log in with the password whose verifier
    the policy keeps (guard password); every request is logged as with guard query.
    With a certificate, both endpoints require TLS."""
    if no_pg and no_http:
        raise click.UsageError("--no-pg and --no-http together leave nothing to serve")
    if (tls_cert is None) != (tls_key is None):
        raise click.UsageError("--tls-cert and --tls-key go together: give both, or neither")
    if allow_plaintext_loopback and tls_cert is None:
        raise click.UsageError(
            "--allow-plaintext-loopback relaxes the TLS requirement of --tls-cert/--tls-key: "
            "give them too, or drop it (without TLS everything is plaintext)"
        )
    endpoints = Endpoints(
        host=host,
        http_port=None if no_http else http_port,
        pg_port=None if no_pg else pg_port,
        allow_plaintext_loopback=allow_plaintext_loopback,
        limits=_settings(ServeLimits, "limit_", settings),
        throttle=_settings(ThrottleSettings, "login_", settings),
    )
    _serve(policy, state, backend, endpoints, tls_cert, tls_key)


@guarded
def _serve(
    policy: Path,
    state: Path | None,
    backend: str | None,
    endpoints: Endpoints,
    tls_cert: Path | None,
    tls_key: Path | None,
) -> None:
    tls = tls_context(tls_cert, tls_key) if tls_cert is not None and tls_key is not None else None
    host = endpoints.host
    if tls is None and not is_loopback(host):
        _note(
            f"warning: --host {host} is reachable from other machines and TLS is off: passwords and "
            "answers would cross the network in clear text; add --tls-cert and --tls-key"
        )
    endpoints = dataclasses.replace(endpoints, tls=tls)
    with Guard.open(policy, state=state, backend=backend) as guard:
        # the first analyst's answer on each table should not pay for building its audit state
        guard.prepare()
        freeze_start_up()
        if not any(a.password is not None for a in guard.policy.analysts):
            _note(
                f"warning: no analyst of {guard.policy.path.name} has a password, so nobody can log in: "
                "set analysts.NAME.password (make one with guard password)"
            )

        def ready(urls: dict[str, str]) -> None:
            lines = [f"statguard: serving policy {guard.policy.name} (state {guard.policy.state_dir})"]
            if "http" in urls:
                lines.append(f"  HTTP        {urls['http']}  ({_ROUTES})")
            if "postgresql" in urls:
                lines.append(f"  PostgreSQL  {urls['postgresql']}")
            lines.append("Ctrl-C or SIGTERM stops both.")
            click.echo("\n".join(lines))

        with server_logging():  # warnings go through a queue: a stalled stderr stalls no client
            asyncio.run(serve_endpoints(guard, endpoints, ready))
    _note("statguard: stopped")


@click.command("password")
@click.option(
    "--stdin", "from_stdin", is_flag=True, help="Read the password from stdin's first line (no prompt)."
)
@click.option(
    "--iterations",
    type=click.IntRange(min=DEFAULT_ITERATIONS),
    default=DEFAULT_ITERATIONS,
    show_default=True,
    help="PBKDF2 rounds; more slows down guessing from a leaked policy, and every login.",
)
def password(from_stdin: bool, iterations: int) -> None:
    """Print the SCRAM-SHA-256 verifier of a password, to paste into a policy as
    analysts.NAME.password. The password itself is never stored or printed."""
    if from_stdin:
        secret = sys.stdin.readline().rstrip("\r\n")
    else:
        secret = click.prompt("Password", hide_input=True, confirmation_prompt=True, err=True)
    if not secret:
        raise click.UsageError("the password is empty")
    click.echo(make_verifier(secret, iterations=iterations))
    _note('paste it into the policy, quoted: analysts.NAME.password: "SCRAM-SHA-256$..."')


def _note(text: str) -> None:
    click.echo(text, err=True)
