"""The HTTP API's request and response bodies, as pydantic models (they feed the OpenAPI
schema at ``/openapi.json``; answers themselves are sent as the library serialises them)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema

__all__ = [
    "Account",
    "Answer",
    "BudgetReport",
    "Charge",
    "Epsilon",
    "ErrorBody",
    "Health",
    "LogEntry",
    "QueryRequest",
]


def _scalar(value: Any) -> Any:
    # taken as JSON gave it ("3" stays text, 3 a number): one check and one message,
    # where a union of strict types reports one failure per member
    if value is not None and not isinstance(value, bool | int | float | str):
        raise ValueError("a parameter must be a string, a number, true/false or null")
    return value


#: a bound parameter's JSON value
JsonParameter = Annotated[
    Any, AfterValidator(_scalar), WithJsonSchema({"type": ["string", "number", "boolean", "null"]})
]


class QueryRequest(BaseModel):
    """One aggregate SQL query, with values for its ``$1, $2, ...`` (or ``?``) placeholders."""

    model_config = ConfigDict(extra="forbid")

    sql: str = Field(description="One aggregate SELECT over a protected table.", min_length=1)
    parameters: list[JsonParameter] | None = Field(
        default=None,
        description="Values bound to $1, $2, ... (or ?) as literals, never spliced into the text.",
    )
    flags: bool = Field(
        default=False,
        description="Add a text column <label>_flag after each aggregate column, holding its flag "
        "(released, suppressed or noised), for tabular clients; also ?flags=true.",
    )


class Answer(BaseModel):
    """``ProtectedResult.to_json()``: withheld cells are null, every cell has a flag; a
    float NaN is "NaN" (null is the NULL group) and infinities "Infinity" / "-Infinity"."""

    status: Literal["answered"]
    columns: list[str]
    rows: list[list[Any]]
    flags: list[list[Literal["released", "suppressed", "noised"]]]
    notes: list[str]


class ErrorBody(BaseModel):
    """Why there is no answer. ``error`` is the error class (``QueryRejected``,
    ``QueryRefused``, ``BudgetExhausted``, ``AccessDenied``, ...); ``reason`` says what to
    change and never contains a protected value."""

    status: str = Field(
        description='"refused" (the guard said no), "rejected" (a malformed request) or "error"'
    )
    error: str
    reason: str


class Epsilon(BaseModel):
    exact: str = Field(description='the exact rational, e.g. "1/3"')
    value: float


class Account(BaseModel):
    account: str = Field(description='"global", "analyst:<name>" or "group:<name>"')
    limit: Epsilon | None
    spent: Epsilon
    remaining: Epsilon | None


class Charge(BaseModel):
    sequence: int
    time: str
    analyst: str
    epsilon: Epsilon
    #: what the charge spent from the global account (0 for an answer already drawn)
    global_: Epsilon = Field(alias="global")
    log_id: int | None
    sql: str | None


class BudgetReport(BaseModel):
    """The caller's own account and the shared ones (group, global), and their own charges."""

    accounts: list[Account]
    charges: list[Charge]


class LogEntry(BaseModel):
    """One of the caller's own requests, as the guard logged it."""

    id: int
    time: str
    sql: str
    decision: str = Field(description='"answered", "refused", "rejected" or "error"')
    error: str | None
    reason: str | None
    columns: list[str] | None
    rows: list[list[Any]] | None
    flags: list[list[str]] | None
    notes: list[str] | None


class Health(BaseModel):
    status: Literal["ok"]
    policy: str
