"""The offline audit of a query log: replay every logged answer's query sets through
the guard's own front stages and the history maths, and report every group of fewer
than k respondents that a combination of answers discloses, with the queries and
analysts that combine (``guard audit``).

    logsource   reading logs: the guard's own store, CSV or JSONL files
    answers     which cells of a logged answer were published
    cellsets    the query sets of a logged query's cells, read from a backend
    offline     the replay: one span auditor per space, across analysts
    report      Markdown, HTML and JSON reports; chart: the timeline picture
"""
