"""Run-time parameters of a session: what SHOW answers, SET changes and ParameterStatus reports.

Each parameter is declared once in :data:`SETTINGS` (name, default, whether the server
reports it, whether clients may change it and to what). Values only describe the
session: no setting reaches the data engine, so SET can never loosen the guard.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from guard.server.pgwire import sqlstate
from guard.server.pgwire.sqlstate import SqlError

__all__ = [
    "FLAGS",
    "SERVER_VERSION",
    "SERVER_VERSION_NUM",
    "SETTINGS",
    "SessionSettings",
    "Setting",
    "version_text",
]

#: what clients parse: PostgreSQL 16 features and catalogs are what the endpoint emulates
SERVER_VERSION = "16.0 (statguard)"
SERVER_VERSION_NUM = "160000"


def version_text() -> str:
    """``SELECT version()``: drivers read the PostgreSQL version from its second word."""
    try:
        package = importlib.metadata.version("statguard")
    except importlib.metadata.PackageNotFoundError:
        package = "unknown"
    return f"PostgreSQL 16.0 (statguard {package}), a statistical database guard"


def _utf8_only(value: str) -> str:
    if value.upper().replace("-", "").replace("_", "") in ("UTF8", "UNICODE"):
        return "UTF8"
    raise SqlError(
        sqlstate.INVALID_PARAMETER_VALUE,
        f'invalid value for parameter "client_encoding": "{value}": statguard speaks UTF8 only',
    )


def _iso_dates(value: str) -> str:
    parts = [p.strip().upper() for p in value.split(",") if p.strip()]
    orders = [p for p in parts if p in ("MDY", "DMY", "YMD", "US", "EURO", "EUROPEAN", "NONEURO")]
    styles = [p for p in parts if p not in orders]
    if styles not in ([], ["ISO"]):
        raise SqlError(
            sqlstate.INVALID_PARAMETER_VALUE,
            f'invalid value for parameter "DateStyle": "{value}": statguard writes dates in ISO format only',
        )
    order = (
        {"US": "MDY", "NONEURO": "MDY", "EURO": "DMY", "EUROPEAN": "DMY"}.get(orders[-1], orders[-1])
        if orders
        else "MDY"
    )
    return f"ISO, {order}"


def _always_on(value: str) -> str:
    if value.lower() in ("on", "true", "1", "yes"):
        return "on"
    raise SqlError(
        sqlstate.INVALID_PARAMETER_VALUE,
        "standard_conforming_strings is always on here: backslashes in strings are plain characters",
    )


def _float_digits(value: str) -> str:
    if re.fullmatch(r"-?\d+", value.strip()) and -15 <= int(value) <= 3:
        return str(int(value))
    raise SqlError(
        sqlstate.INVALID_PARAMETER_VALUE, f'invalid value for parameter "extra_float_digits": "{value}"'
    )


def _on_off(value: str) -> str:
    """A boolean parameter, spelled as PostgreSQL accepts it (on/off, true/false, yes/no, 1/0)."""
    word = value.strip().lower()
    if word in ("on", "true", "yes", "1", "t", "y"):
        return "on"
    if word in ("off", "false", "no", "0", "f", "n"):
        return "off"
    raise SqlError(
        sqlstate.INVALID_PARAMETER_VALUE, f'parameter "{FLAGS}" requires a Boolean value (on, off): "{value}"'
    )


#: the statguard setting that adds a flag column after each aggregate column
FLAGS = "statguard.flags"


@dataclass(frozen=True)
class Setting:
    name: str
    default: str
    #: sent as ParameterStatus at start-up and whenever it changes
    reported: bool = False
    #: False: fixed by the server (SET fails with 55P02)
    settable: bool = True
    #: normalises an accepted value, raises SqlError for a refused one
    check: Callable[[str], str] | None = None


SETTINGS: tuple[Setting, ...] = (
    Setting("server_version", SERVER_VERSION, reported=True, settable=False),
    Setting("server_version_num", SERVER_VERSION_NUM, settable=False),
    Setting("server_encoding", "UTF8", reported=True, settable=False),
    Setting("client_encoding", "UTF8", reported=True, check=_utf8_only),
    Setting("DateStyle", "ISO, MDY", reported=True, check=_iso_dates),
    Setting("IntervalStyle", "postgres", reported=True),
    Setting("TimeZone", "UTC", reported=True),
    Setting("integer_datetimes", "on", reported=True, settable=False),
    Setting("standard_conforming_strings", "on", reported=True, check=_always_on),
    Setting("application_name", "", reported=True),
    Setting("is_superuser", "off", reported=True, settable=False),
    # the analyst's name; filled in per session
    Setting("session_authorization", "", reported=True, settable=False),
    Setting("in_hot_standby", "off", reported=True, settable=False),
    # nothing an analyst sends can write: say so to tools that look
    Setting("default_transaction_read_only", "on", reported=True),
    Setting("transaction_read_only", "on"),
    Setting("transaction_isolation", "read committed"),
    Setting("default_transaction_isolation", "read committed"),
    Setting("search_path", '"$user", public'),
    Setting("extra_float_digits", "1", check=_float_digits),
    Setting("max_identifier_length", "63", settable=False),
    Setting("lc_collate", "C.UTF-8", settable=False),
    Setting("lc_ctype", "C.UTF-8", settable=False),
    Setting("lc_messages", "C.UTF-8"),
    Setting("lc_monetary", "C.UTF-8"),
    Setting("lc_numeric", "C.UTF-8"),
    Setting("lc_time", "C.UTF-8"),
    Setting("bytea_output", "hex"),
    Setting("client_min_messages", "notice"),
    Setting("statement_timeout", "0"),
    Setting("lock_timeout", "0"),
    Setting("idle_in_transaction_session_timeout", "0"),
    Setting("escape_string_warning", "on"),
    Setting("max_index_keys", "32", settable=False),
    Setting("block_size", "8192", settable=False),
    Setting("default_table_access_method", "heap", settable=False),
    Setting("password_encryption", "scram-sha-256", settable=False),
    # statguard's own: on adds a text column <label>_flag (released, suppressed, noised)
    # after each aggregate column, for clients that drop notices (BI tools, pandas)
    Setting(FLAGS, "off", check=_on_off),
)

_BY_NAME = {s.name.lower(): s for s in SETTINGS}


class SessionSettings:
    """One session's parameter values."""

    def __init__(self, analyst: str) -> None:
        self._values: dict[str, str] = {s.name.lower(): s.default for s in SETTINGS}
        self._values["session_authorization"] = analyst
        self._names: dict[str, str] = {s.name.lower(): s.name for s in SETTINGS}

    def get(self, name: str) -> tuple[str, str]:
        """(canonical name, value) of ``name``.

        Raises:
            SqlError: 42704, a parameter neither declared nor set in this session.
        """
        key = name.lower()
        if key not in self._values:
            raise SqlError(sqlstate.UNDEFINED_OBJECT, f'unrecognized configuration parameter "{name}"')
        return self._names[key], self._values[key]

    def set(self, name: str, value: str | None) -> tuple[str, str] | None:
        """Set ``name`` (None: back to its default). Returns (name, value) when the
        change must be reported to the client as a ParameterStatus.

        Unknown names are accepted and remembered (drivers and tools send many), as
        PostgreSQL does for namespaced custom parameters.

        Raises:
            SqlError: a fixed parameter, or a value the server refuses.
        """
        key = name.lower()
        declared = _BY_NAME.get(key)
        if declared is None:
            self._names.setdefault(key, name)
            self._values[key] = value if value is not None else ""
            return None
        if not declared.settable:
            raise SqlError(
                sqlstate.CANT_CHANGE_RUNTIME_PARAM, f'parameter "{declared.name}" cannot be changed'
            )
        new = declared.default if value is None else declared.check(value) if declared.check else value
        self._values[key] = new
        return (declared.name, new) if declared.reported else None

    @property
    def flags(self) -> bool:
        """Whether answers carry a flag column after each aggregate (``statguard.flags``)."""
        return self._values[FLAGS] == "on"

    def reported(self) -> Iterator[tuple[str, str]]:
        for setting in SETTINGS:
            if setting.reported:
                yield setting.name, self._values[setting.name.lower()]

    def all(self) -> list[tuple[str, str]]:
        return sorted((self._names[k], v) for k, v in self._values.items())

    def apply_startup(self, parameters: Mapping[str, str]) -> None:
        """Parameters of the start-up packet, including ``options`` (``-c name=value``).

        Raises:
            SqlError: a value the server refuses (fatal at start-up).
        """
        ignored = {"user", "database", "replication", "options"}
        for name, value in parameters.items():
            if name not in ignored and not name.startswith("_pq_."):
                self._set_at_startup(name, value)
        for name, value in _options(parameters.get("options", "")):
            self._set_at_startup(name, value)

    def _set_at_startup(self, name: str, value: str) -> None:
        declared = _BY_NAME.get(name.lower())
        if declared is not None and not declared.settable:
            return  # clients echo server-fixed values back; nothing to change
        try:
            self.set(name, value)
        except SqlError as error:
            raise SqlError(error.sqlstate, error.message, fatal=True) from None


def _options(text: str) -> Iterator[tuple[str, str]]:
    words = re.findall(r"(?:\\.|\S)+", text)
    i = 0
    while i < len(words):
        word = words[i].replace("\\ ", " ")
        if word == "-c" and i + 1 < len(words):
            i += 1
            word = "--" + words[i].replace("\\ ", " ")
        if word.startswith("--") and "=" in word:
            name, _, value = word[2:].partition("=")
            yield name.replace("-", "_"), value
        i += 1
