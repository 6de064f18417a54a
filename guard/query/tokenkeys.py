"""A text's tokens as a cache key, without tokenizing texts that differ only in a tag.

The guard keeps what it learned of a text by the text's tokens (type and text, in
order: comments and layout aside), because clients send the same query again and again,
each tagged differently (BI tools and load drivers append ``/* request 123 */``).
Tokenizing in pure-Python sqlglot costs about as much as answering from memory, and a
request was tokenized several times (the PostgreSQL endpoint's router, the front
stages' memory). :class:`TokenKeys` remembers the tokens of recent texts by the text
*without a trailing tag* (:func:`untagged`), so a text that differs from one seen
before only in its trailing tag is not tokenized again.

Why that is exact: a trailing tag is a block comment at the very end of the text (only
layout after it), preceded by layout, whose body holds only characters that mean
nothing inside a comment (:data:`TAG_BODY`: no ``*`` or ``/``, so it neither ends early
nor nests, no ``+`` of an optimizer hint, no quote, ``$`` or backslash that could end a
string). Two texts ``head + tag1`` and ``head + tag2`` then tokenize alike: where
``head`` ends outside any literal, the tag is a comment, and comments are no tokens;
where it ends inside a string, quoted name or comment, the tag's body cannot close it,
so both texts end there alike (both fail to tokenize, or both end in the same
comment). Texts with a tag and texts without are remembered apart.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

__all__ = ["TAG_BODY", "TokenKeys", "untagged"]

#: what a trailing tag's body may hold: word characters, spaces and ``. , : = # @ -``
TAG_BODY = re.compile(r"[\w .,:=#@-]*")
#: layout (ASCII only: what every tokenizer skips) before a tag, and after it to the end
_LAYOUT_CHARS = " \t\n\r"
_LAYOUT = re.compile(r"[ \t\n\r]*")


def untagged(text: str) -> str | None:
    """``text`` without its trailing tag (everything from the tag's ``/*`` on), or None
    when it has none. A body of layout only is no tag (nothing to gain)."""
    start = text.rfind("/*")
    if start < 1 or text[start - 1] not in _LAYOUT_CHARS:
        return None
    end = text.find("*/", start + 2)
    if end < 0 or _LAYOUT.fullmatch(text, end + 2) is None:
        return None
    body = text[start + 2 : end]
    if not body.strip() or TAG_BODY.fullmatch(body) is None:
        return None
    return text[:start]


class TokenKeys:
    """``tokenize(text)`` (a hashable key, or None when the text does not tokenize),
    remembered for the last ``size`` texts, a tagged text by its untagged head.
    Thread-safe."""

    def __init__(self, tokenize: Callable[[str], Hashable | None], size: int = 1024, longest: int = 4096):
        """``longest``: texts longer than this are tokenized and not remembered."""
        self._tokenize = tokenize
        self._size = size
        self._longest = longest
        self._lock = threading.Lock()
        self._known: OrderedDict[tuple[bool, str], Hashable | None] = OrderedDict()

    def key(self, text: str) -> Hashable | None:
        found, key = self.known(text)
        if found:
            return key
        key = self._tokenize(text)
        self.remember(text, key)
        return key

    def remember(self, text: str, key: Hashable | None) -> None:
        """Remember ``key`` as ``text``'s (a caller that tokenized ``text`` itself, as
        ``tokenize`` would have: :meth:`key` then returns it)."""
        if len(text) <= self._longest:
            with self._lock:
                self._known[_known(text)] = key
                while len(self._known) > self._size:
                    self._known.popitem(last=False)

    def known(self, text: str) -> tuple[bool, Hashable | None]:
        """(True, the key) when ``text``'s key is remembered, else (False, None): never
        tokenizes (cheap enough for an event loop)."""
        if len(text) > self._longest:
            return False, None
        known = _known(text)
        with self._lock:
            if known in self._known:
                self._known.move_to_end(known)
                return True, self._known[known]
        return False, None


def _known(text: str) -> tuple[bool, str]:
    """What a text's key is remembered by: its untagged head, or the whole text. Tagged
    and untagged texts apart: "t " + tag and "t " need not tokenize alike (a head that
    ends inside an unterminated comment)."""
    head = untagged(text)
    return (True, head) if head is not None else (False, text)
