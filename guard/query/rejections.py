"""Standing rejections, remembered: a text the guard rejected is not read again.

A rejected text was read twice (the front stages, then the post-processing planner) and
never kept, because its message may quote the text's own parts, comments included; a
quarter of what clients send can be texts that are rejected every time (a tool probing
``SELECT *``). What a rejection depends on: the text, the analyst (the tables they may
see, whether their answers are audited), the policy (fixed for a guard) and the column
types of the tables the analyst sees. So a rejection is kept per analyst and per text,
with the column types it was read with, and only when it *stands* (no post-processing
plan took the text over) and came before any data was read.

A text that differs from a kept one only in its trailing tag (``tokenkeys.untagged``)
shares its rejection when the rejection cannot have quoted the tag: it is kept for
tagged texts only when reading the untagged head gives the very same message. The two
texts tokenize alike, the guard never looks at comments, and a message quotes a comment
(a node rendered with it, a parse error's context, a length) only by where it is and
what it holds, so a message that holds nothing of one text's tag holds nothing of any
other tag in the same place. The raw-text checks (length, NUL, encoding) count the tag:
a text they reject is never recalled.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence

from guard.errors import QueryRejected
from guard.policy.model import Policy
from guard.query.front import MAX_CACHED_LENGTH, MAX_CACHED_TEXTS, visible_tables
from guard.query.parse import check_text
from guard.query.tokenkeys import untagged

__all__ = ["Rejections", "standing"]

#: ``(analyst, text)``: the message of the standing rejection of ``text``, or None
Reread = Callable[[str, str], str | None]


class Rejections:
    """The standing rejections of the last ``size`` (analyst, text) pairs. Thread-safe."""

    def __init__(
        self,
        policy: Policy,
        column_types: Callable[[str], Mapping[str, str]],
        size: int = MAX_CACHED_TEXTS,
        longest: int = MAX_CACHED_LENGTH,
    ) -> None:
        """``column_types(table)``: the engine's column types of a declared table (a
        rejection read with other types is read again); ``longest``: longer texts are
        not kept."""
        self._policy = policy
        self._column_types = column_types
        self._size = size
        self._longest = longest
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple[str, bool, str], tuple[str, Hashable]] = OrderedDict()

    def recall(self, sql: str, analyst: str, parameters: Sequence[object] | None) -> Hashable | None:
        """Raise the standing rejection kept for ``sql`` from ``analyst``, if any; else
        return the column types to :meth:`keep` its rejection with (taken now, before it
        is read: a rejection is never kept with types newer than it was read with), or
        None when it would not be kept (a text the raw-text checks reject, whose length
        the tag counts in, is never recalled: the guard reads it and says why).

        Raises:
            QueryRejected: the kept rejection.
        """
        key = self._key(sql, analyst, parameters)
        if key is None:
            return None
        types = self._types(analyst)
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None:
                self._kept.move_to_end(key)
        if kept is not None and kept[1] == types:
            raise QueryRejected(kept[0])
        return types

    def keep(
        self,
        sql: str,
        analyst: str,
        parameters: Sequence[object] | None,
        message: str,
        types: Hashable,
        reread: Reread,
    ) -> None:
        """Keep ``message``, the standing rejection of ``sql`` read with column ``types``
        (what :meth:`recall` returned). A tagged text's rejection is kept only if
        ``reread(analyst, head)`` rejects its untagged head alike."""
        key = self._key(sql, analyst, parameters, check=False)
        if key is None:
            return
        if key[1]:
            try:
                alike = reread(analyst, key[2]) == message
            except Exception:  # the check must never fail the request it runs for
                alike = False
            if not alike:
                return  # it may quote the tag (or the head reads otherwise): not shared
        with self._lock:
            self._kept[key] = (message, types)
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)

    def _types(self, analyst: str) -> Hashable:
        """The column types of every table ``analyst`` may see."""
        tables = visible_tables(self._policy, self._policy.analyst(analyst))
        return tuple((t.name, tuple(self._column_types(t.name).items())) for t in tables)

    def _key(
        self, sql: str, analyst: str, parameters: Sequence[object] | None, check: bool = True
    ) -> tuple[str, bool, str] | None:
        if parameters is not None or not isinstance(sql, str) or not isinstance(analyst, str):
            return None  # parameters are bound into the tree: the text alone does not say
        if check:
            try:
                check_text(sql, self._policy.limits)
            except QueryRejected:
                return None  # its own checks reject it, as the guard then says
        if len(sql) > self._longest:
            return None
        head = untagged(sql)
        return (analyst, True, head) if head is not None else (analyst, False, sql)


def standing(read: Callable[[], object], outer: Callable[[], object | None]) -> str | None:
    """The message of the standing rejection of a text (``Reread``'s answer): ``read()``
    runs the front stages on it, ``outer()`` plans it as a query over protected answers
    (None: it is not one); None when it is read, or planned."""
    try:
        read()
    except QueryRejected as rejected:
        try:
            return rejected.message if outer() is None else None
        except QueryRejected as error:
            return error.message
    return None
