"""The docs list what the code does: docs/operations.md's log-event table names every event the
sidecar logs and nothing else; its alert table names every alerting rule of deploy/prometheus/, with
its severity and a runbook section, and nothing else. And the docs hold together: README.md stays a
front door of at most 250 lines, no doc names a path outside the repository, and every relative link
of README.md and docs/ leads to a file of the repository (and a heading of it, for an anchor).

Events are found in the sources, not at run time: every call of ``info``/``warning``/``error``/
``limited`` on an object named ``log`` (the :class:`~hyperdata_sidecar.logs.EventLog` of the
sidecar, the tailers, the watcher and the agents) in the installed package, ``agents/`` included.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = (REPO / "hyperdata_sidecar", REPO / "agents")
README = REPO / "README.md"
DOCS = [README, *sorted((REPO / "docs").glob("*.md"))]
OPERATIONS = REPO / "docs" / "operations.md"
README_MAX_LINES = 250
ALERT_RULES = REPO / "deploy" / "prometheus" / "alerts.yml"
# EventLog's methods and the position of the event name among their arguments.
EVENT_ARGUMENT = {"info": 0, "warning": 0, "error": 0, "limited": 1}


# ---------------------------------------------------------------------- events in the code


def event_names(expression: ast.expr) -> set[str] | None:
    """The event names an argument can take: a string literal, or a conditional between literals;
    None for anything the sources alone cannot tell."""
    if isinstance(expression, ast.Constant) and isinstance(expression.value, str):
        return {expression.value}
    if isinstance(expression, ast.IfExp):
        body, orelse = event_names(expression.body), event_names(expression.orelse)
        return None if body is None or orelse is None else body | orelse
    return None


def event_log_calls() -> list[tuple[str, ast.Call]]:
    """Every ``<...>.log.<method>(...)`` or ``log.<method>(...)`` call of an EventLog method, with
    where it is (``path:line``)."""
    calls = []
    for root in SOURCES:
        for path in sorted(root.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                    continue
                receiver = node.func.value
                named = receiver.attr if isinstance(receiver, ast.Attribute) else getattr(receiver, "id", None)
                if named == "log" and node.func.attr in EVENT_ARGUMENT:
                    calls.append((f"{path.relative_to(REPO)}:{node.lineno}", node))
    return calls


def event_argument(call: ast.Call) -> ast.expr | None:
    assert isinstance(call.func, ast.Attribute)
    position = EVENT_ARGUMENT[call.func.attr]
    if len(call.args) > position:
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == "event"), None)


def logged_events() -> dict[str, str]:
    """Event name → the first place that logs it."""
    found: dict[str, str] = {}
    for where, call in event_log_calls():
        argument = event_argument(call)
        for name in (event_names(argument) if argument is not None else None) or set():
            found.setdefault(name, where)
    return found


# ---------------------------------------------------------------------- the docs' lists


def section(path: Path, heading: str) -> str:
    """The text under ``heading`` (a whole Markdown heading line) up to the next heading of any level."""
    text = path.read_text()
    match = re.search(rf"^{re.escape(heading)}\n(.*?)(?=^#+ |\Z)", text, flags=re.MULTILINE | re.DOTALL)
    assert match, f"{path.relative_to(REPO)} has no section {heading!r}"
    return match.group(1)


def listed_events() -> list[str]:
    """The first column of operations.md's log-event table."""
    return re.findall(r"^\| `([a-z0-9_]+)` \|", section(OPERATIONS, "## Log events"), flags=re.MULTILINE)


def alert_table() -> dict[str, tuple[str, str]]:
    """operations.md's alert table: alert → (link anchor, severity)."""
    rows = re.findall(r"^\| \[(\w+)\]\(#([\w-]+)\) \| (\w+) \|", section(OPERATIONS, "## 6. Load the alerts"), flags=re.MULTILINE)
    return {name: (anchor, severity) for name, anchor, severity in rows}


def alert_rules() -> dict[str, tuple[str | None, str | None]]:
    """deploy/prometheus/alerts.yml: alert → (severity label, runbook annotation), one rule block each."""
    blocks = re.split(r"^\s*- alert: ", ALERT_RULES.read_text(), flags=re.MULTILINE)[1:]
    rules = {}
    for block in blocks:
        name = block.split(None, 1)[0]
        severity = re.search(r"^\s*severity: (\S+)", block, flags=re.MULTILINE)
        runbook = re.search(r"^\s*runbook: (\S+)", block, flags=re.MULTILINE)
        rules[name] = (severity.group(1) if severity else None, runbook.group(1) if runbook else None)
    return rules


def headings(path: Path, level: str) -> set[str]:
    return set(re.findall(rf"^{level} (\S+)$", path.read_text(), flags=re.MULTILINE))


# ---------------------------------------------------------------------- log events


def test_every_event_name_in_the_code_is_a_literal() -> None:
    unreadable = [where for where, call in event_log_calls() if (arg := event_argument(call)) is None or event_names(arg) is None]

    assert unreadable == [], "event names must be string literals (or a choice between them) so the docs can list them"


def test_every_event_the_code_logs_is_in_the_operations_list() -> None:
    listed = set(listed_events())

    missing = {name: where for name, where in logged_events().items() if name not in listed}

    assert missing == {}, "add these to docs/operations.md's 'Log events' table"


def test_every_event_in_the_operations_list_is_logged_by_the_code() -> None:
    logged = logged_events()

    assert [name for name in listed_events() if name not in logged] == []


def test_the_operations_list_names_each_event_once() -> None:
    listed = listed_events()

    assert sorted(name for name in set(listed) if listed.count(name) > 1) == []


# ---------------------------------------------------------------------- alerts


def test_every_alerting_rule_is_in_the_alert_table() -> None:
    assert sorted(set(alert_rules()) - set(alert_table())) == []


def test_every_alert_in_the_table_is_an_alerting_rule() -> None:
    assert sorted(set(alert_table()) - set(alert_rules())) == []


def test_the_alert_table_gives_each_alert_the_severity_of_its_rule() -> None:
    rules = alert_rules()

    wrong = {
        name: (severity, rules[name][0])
        for name, (_anchor, severity) in alert_table().items()
        if name in rules and severity != rules[name][0]
    }

    assert wrong == {}


@pytest.mark.parametrize("name", sorted(alert_rules()))
def test_each_alert_has_a_runbook_section_its_table_row_and_rule_link_to(name: str) -> None:
    anchor = name.lower()

    assert name in headings(OPERATIONS, "###")
    assert alert_table()[name][0] == anchor
    assert alert_rules()[name][1] == f"docs/operations.md#{anchor}"


# ---------------------------------------------------------------------- the docs as a whole


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown file: lower case, punctuation dropped,
    spaces as hyphens, a repeated one numbered (``-1``, ``-2``, ...)."""
    found: set[str] = set()
    for heading in re.findall(r"^#+ (.+)$", without_code_blocks(path.read_text()), flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchor, n = slug, 0
        while anchor in found:
            n += 1
            anchor = f"{slug}-{n}"
        found.add(anchor)
    return found


def without_code_blocks(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


def relative_links(path: Path) -> list[str]:
    """The targets of the Markdown links of ``path`` that are not URLs, outside code."""
    text = re.sub(r"`[^`\n]*`", "", without_code_blocks(path.read_text()))
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def test_the_readme_is_a_front_door_of_at_most_250_lines() -> None:
    lines = len(README.read_text().splitlines())

    assert lines <= README_MAX_LINES, f"README.md has {lines} lines: move the detail into docs/"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_no_doc_names_a_path_outside_the_repository(doc: Path) -> None:
    text = doc.read_text()

    assert [line for line in text.splitlines() if "../" in line or "shared/reference" in line] == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_leads_to_a_file_and_heading_of_the_repository(doc: Path) -> None:
    def leads_somewhere(target: str) -> bool:
        file_part, _, anchor = target.partition("#")
        linked = (doc.parent / file_part).resolve() if file_part else doc
        if REPO not in linked.parents or not linked.exists():
            return False
        return not anchor or linked.suffix != ".md" or anchor in anchors(linked)

    assert [target for target in relative_links(doc) if not leads_somewhere(target)] == []
