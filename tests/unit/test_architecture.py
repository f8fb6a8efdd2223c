"""The shell's boundaries, checked on the sources: web/ and agents/ see the sidecar only through
ports.py, and only the standalone app names plugin.Sidecar (to build one)."""

from __future__ import annotations

import ast
from pathlib import Path

import hyperdata_sidecar

PACKAGE = Path(hyperdata_sidecar.__file__).parent
AGENTS = PACKAGE.parent / "agents" if (PACKAGE.parent / "agents").is_dir() else PACKAGE / "agents"


def imports(path: Path) -> set[tuple[str, str]]:
    """(module, name) of every ``from module import name`` in ``path``, TYPE_CHECKING blocks included."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {(node.module, alias.name) for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {(alias.name, "") for alias in node.names}
    return found


def sources(*dirs: Path) -> list[Path]:
    return sorted(p for d in dirs for p in d.rglob("*.py"))


def test_web_and_agents_never_import_the_plugin():
    offenders = [
        str(path)
        for path in sources(PACKAGE / "web", AGENTS)
        if any(module == "hyperdata_sidecar.plugin" for module, _ in imports(path))
    ]
    assert offenders == []


def test_only_the_standalone_app_names_the_sidecar_class():
    offenders = [
        str(path)
        for path in sources(PACKAGE, AGENTS)
        if path.name not in ("plugin.py", "standalone.py") and ("hyperdata_sidecar.plugin", "Sidecar") in imports(path)
    ]
    assert offenders == []


def test_each_agent_module_sees_only_its_own_narrow_host():
    offenders = [
        path.name
        for path in sources(AGENTS)
        if path.name != "__init__.py" and ("hyperdata_sidecar.ports", "AgentHost") in imports(path)
    ]
    assert offenders == []


FAUST_TABLES = {"offsets", "seals", "backups", "snapshots"}


def test_every_table_write_of_the_agents_goes_through_the_state_writer():
    """A direct ``table[key] = value`` would let a full state disk crash the agent (or drop the write)."""
    offenders = []
    for path in sources(AGENTS):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Assign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(
                    isinstance(t, ast.Subscript) and isinstance(t.value, ast.Attribute) and t.value.attr in FAUST_TABLES
                    for t in targets
                ):
                    offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []
