"""The one table a query reads, as stage 3 resolves its columns: roles enforced, unknown
names answered with what may be used ("did you mean ...?")."""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from sqlglot import exp

from guard.errors import QueryRejected
from guard.policy.model import Column, Role, Table
from guard.query.names import column_qualifier

__all__ = ["Scope"]


class Scope:
    """The one table a query reads, its alias and its column types."""

    def __init__(self, table: Table, alias: str | None, types: Mapping[str, str]) -> None:
        self.table = table
        self.alias = alias
        self.types = types

    def column(self, node: exp.Column, *, clause: str) -> Column:
        column_qualifier(node, self.table.name, self.alias)
        column = self.table.column(node.name)
        if column is None:
            usable = [c.name for c in self.table.columns if c.role is not Role.IDENTIFIER]
            close = difflib.get_close_matches(node.name.lower(), [u.lower() for u in usable], n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise QueryRejected(
                f"unknown column {node.name!r} in table {self.table.name}{hint}: "
                f"the columns you may use are {', '.join(usable)}"
            )
        if column.role is Role.IDENTIFIER:
            raise QueryRejected(
                f"column {column.name!r} identifies respondents and cannot be used "
                f"anywhere in a query ({clause} included)"
            )
        return column

    def dimension(self, node: exp.Column, *, clause: str) -> Column:
        column = self.column(node, clause=clause)
        if column.role is Role.MEASURE:
            dims = ", ".join(self.table.names(Role.DIMENSION)) or "none"
            raise QueryRejected(
                f"measure {column.name!r} cannot be used in {clause}: it may only appear inside "
                f"COUNT, SUM or AVG; {clause} may use the dimension columns ({dims})"
            )
        return column

    def type_of(self, column: Column) -> str:
        return self.types.get(column.name.lower(), "VARCHAR")
