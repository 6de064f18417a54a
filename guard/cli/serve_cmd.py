"""``guard serve`` (the PostgreSQL and HTTP endpoints) and ``guard password`` (a verifier
for a policy's ``analysts.NAME.password``).

Thin: the endpoints live in :mod:`guard.server`. Exit codes: 0 stopped by SIGINT/SIGTERM,
2 usage, policy, state or listening error (port in use, bad certificate).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click

from guard.cli.options import BACKEND, POLICY, STATE, guarded
from guard.core import Guard
from guard.policy.credentials import DEFAULT_ITERATIONS, make_verifier
from guard.server.listen import is_loopback, tls_context
from guard.server.serve import Endpoints
from guard.server.serve import serve as serve_endpoints

__all__ = ["password", "serve"]

_ROUTES = "POST /query, GET /budget, GET /log, GET /health; schema at /docs"


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
@click.option("--no-pg", is_flag=True, help="Do not start the PostgreSQL endpoint.")
@click.option("--no-http", is_flag=True, help="Do not start the HTTP API.")
def serve(
    policy: Path,
    state: Path | None,
    backend: str | None,
    host: str,
    pg_port: int,
    http_port: int,
    tls_cert: Path | None,
    tls_key: Path | None,
    no_pg: bool,
    no_http: bool,
) -> None:
    """Serve POLICY to analysts over the PostgreSQL protocol (psql, JDBC, pandas) and an
    HTTP API, until Ctrl-C or SIGTERM. Analysts log in with the password whose verifier
    the policy keeps (guard password); every request is logged as with guard query."""
    if no_pg and no_http:
        raise click.UsageError("--no-pg and --no-http together leave nothing to serve")
    if (tls_cert is None) != (tls_key is None):
        raise click.UsageError("--tls-cert and --tls-key go together: give both, or neither")
    _serve(
        policy,
        state,
        backend,
        host,
        None if no_pg else pg_port,
        None if no_http else http_port,
        tls_cert,
        tls_key,
    )


@guarded
def _serve(
    policy: Path,
    state: Path | None,
    backend: str | None,
    host: str,
    pg_port: int | None,
    http_port: int | None,
    tls_cert: Path | None,
    tls_key: Path | None,
) -> None:
    tls = tls_context(tls_cert, tls_key) if tls_cert is not None and tls_key is not None else None
    if tls is None and not is_loopback(host):
        _note(
            f"warning: --host {host} is reachable from other machines and TLS is off: passwords and "
            "answers would cross the network in clear text; add --tls-cert and --tls-key"
        )
    endpoints = Endpoints(host=host, http_port=http_port, pg_port=pg_port, tls=tls)
    with Guard.open(policy, state=state, backend=backend) as guard:
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
