"""Every answer and refusal of a code, as text to compare with another code's.

Each corpus query (tests/query/rejected.sql and accepted.sql) is asked as is and with
two trailing tags, then the endpoint benchmark's students mix 1,400 times (tagged, half
as alice, half as bob), through ``Guard.query`` on fresh state folders; one JSON line per
request: the outcome and message, or the columns, rows, flags and notes. A change meant
as pure speed must print the same lines as the code before it::

    git archive main | tar -x -C /tmp/before
    PYTHONPATH=/tmp/before python benchmarks/differential_answers.py /tmp/before > before.jsonl
    python benchmarks/differential_answers.py . > after.jsonl
    cmp before.jsonl after.jsonl

The argument is the root of the tree whose ``tests/query`` corpora (and policies) to read.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from guard import Guard, GuardError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_endpoint import MIXES


def ask(guard: Guard, sql: str, analyst: str) -> list[Any]:
    try:
        result = guard.query(sql, analyst=analyst)
    except GuardError as error:
        return [error.kind, error.message]
    rows = json.loads(json.dumps(result.to_dict()["rows"], default=str))
    return ["answered", list(result.columns), rows, [list(f) for f in result.flags], list(result.notes)]


def main() -> None:
    tests = Path(sys.argv[1]).resolve() / "tests" / "query"
    spec = importlib.util.spec_from_file_location("corpus", tests / "test_corpus.py")
    assert spec is not None and spec.loader is not None
    corpus = importlib.util.module_from_spec(spec)
    sys.modules["corpus"] = corpus  # its dataclasses look their module up
    spec.loader.exec_module(corpus)
    folder = Path(tempfile.mkdtemp(prefix="differential-"))
    guards: dict[str, Guard] = {}
    for case in corpus.REJECTED + corpus.ACCEPTED:
        if case.policy not in guards:
            guards[case.policy] = Guard.open(corpus.POLICIES[case.policy], state=folder / case.policy)
        for tag in ("", " /* request 1 */", " /* request 2 */"):
            line = [case.line, tag, ask(guards[case.policy], case.text + tag, case.analyst)]
            print(json.dumps(line, default=str))
    mix = [sql for sql, _ in MIXES["students"]]
    with Guard.open(corpus.POLICIES["students"], state=folder / "mix") as guard:
        for n in range(1400):
            answer = ask(guard, f"{mix[n % len(mix)]} /* request {n} */", "alice" if n % 2 else "bob")
            print(json.dumps(["mix", n, answer], default=str))
    for opened in guards.values():
        opened.close()


if __name__ == "__main__":
    main()
