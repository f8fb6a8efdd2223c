"""The metric names a PromQL expression selects: what the checks of deploy/'s queries compare with /metrics.

Not a parser: it removes what cannot hold a metric name (strings, label matchers, ranges,
grouping label lists) and keeps the identifiers that are neither a function call, a keyword nor
part of a number or duration. ``tests/integration/test_promql.py`` pins what it finds.
"""

from __future__ import annotations

import re

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGES = re.compile(r"\[[^\[\]]*\]")
_LABEL_LISTS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
# Not preceded by a word character or a dot: the "m" of "5m" and the "e3" of "1e3" are no names.
_IDENTIFIER = re.compile(r"(?<![\w.:])[A-Za-z_:][A-Za-z0-9_:]*")
_KEYWORDS = frozenset(
    {
        "and",
        "or",
        "unless",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "offset",
        "bool",
        "atan2",
        "inf",
        "nan",
    }
)


def metric_names(expr: str) -> set[str]:
    """Every metric name ``expr`` selects, e.g. ``{"up"}`` for ``sum by (job) (up{job="x"} == 0)``."""
    text = _STRINGS.sub('""', expr)  # first: a label value may hold braces or brackets
    text = _MATCHERS.sub("", text)
    text = _RANGES.sub("", text)
    text = _LABEL_LISTS.sub("", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        is_call = text[match.end() :].lstrip().startswith("(")
        if not is_call and match.group().lower() not in _KEYWORDS:
            names.add(match.group())
    return names


def exported_names(exposition: str) -> set[str]:
    """The names a Prometheus text exposition makes selectable: every sample name, and every
    declared family (a labelled family with no series yet has only its ``# TYPE`` line), with a
    histogram's ``_bucket``, ``_sum`` and ``_count``."""
    names = set()
    for line in exposition.splitlines():
        if line.startswith("# TYPE "):
            _hash, _type, name, kind = line.split(" ", 3)
            names.add(name)
            if kind == "histogram":
                names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names
