"""A protected answer as an Arrow IPC stream (``Accept: application/vnd.apache.arrow.stream``).

The stream holds the answer's columns exactly (withheld cells are nulls, types inferred
from the released values). What protection did travels in the schema's metadata, so the
columns stay the answer's and nothing can collide with a column name (dates stay
dates, where JSON has ISO text):

- ``statguard.status``: ``"answered"``;
- ``statguard.flags``: JSON, one list per row with one flag per cell (as in ``to_json``);
- ``statguard.notes``: JSON list of the notes.

pyarrow is optional (``pip install statguard[arrow]``): without it the HTTP API answers
JSON only.
"""

from __future__ import annotations

import json
from typing import Any

from guard.result import ProtectedResult

__all__ = ["ARROW_STREAM", "arrow_available", "arrow_stream"]

ARROW_STREAM = "application/vnd.apache.arrow.stream"


def arrow_available() -> bool:
    try:
        import pyarrow  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        return False
    return True


def arrow_stream(result: ProtectedResult) -> bytes:
    """The rows of ``result`` as one Arrow IPC stream (one record batch).

    Raises:
        ImportError: pyarrow is not installed (check :func:`arrow_available` first).
    """
    import pyarrow as pa

    arrays = [_column(pa, [row[i] for row in result.rows]) for i in range(len(result.columns))]
    metadata = {
        "statguard.status": "answered",
        "statguard.flags": json.dumps(result.flags),
        "statguard.notes": json.dumps(result.notes),
    }
    table = pa.Table.from_arrays(arrays, names=list(result.columns), metadata=metadata)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def _column(pa: Any, values: list[Any]) -> Any:
    try:
        return pa.array(values, from_pandas=True)  # from_pandas: NaN is null, as in JSON
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        # a column mixing kinds (a released label next to a number, say) has no single
        # Arrow type: its text is what the JSON answer shows too
        return pa.array([None if v is None else str(v) for v in values], type=pa.string())
