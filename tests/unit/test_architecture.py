"""The shell's boundaries, checked on the sources: web/ and agents/ never import the plugin, only the
standalone app names plugin.Sidecar (to build one), which stays a place that builds and wires; one
door to the producer; no module outside the engines asks which engine runs."""

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


def test_the_commands_stand_beside_the_faust_wiring_not_above_it():
    assert not any(module == "hyperdata_sidecar.plugin" for module, _ in imports(PACKAGE / "commands.py"))


def test_the_sidecar_class_only_builds_and_wires_in_at_most_150_lines():
    tree = ast.parse((PACKAGE / "plugin.py").read_text())
    [sidecar] = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Sidecar"]
    assert sidecar.end_lineno is not None and sidecar.end_lineno - sidecar.lineno + 1 <= 150
    methods = {node.name for node in sidecar.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
    assert methods <= {"__init__", "install", "_topic", "_table"}


# The producer's ``produce`` is reached only where the producer is held and handed on: the data plane
# (the door: a file's line engine, a resend, a publish-once record) and the Python engine, which hands
# the producer's ``produce`` to its reference writer (core/records.py calls what it was handed).
DOOR = {PACKAGE / "dataplane.py", PACKAGE / "engines" / "python.py", PACKAGE / "core" / "records.py"}


def test_produce_is_reached_only_through_the_door():
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
        for path in sources(PACKAGE, AGENTS)
        if path not in DOOR
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr == "produce"
    ]
    assert offenders == []


def test_the_data_plane_has_no_public_produce():
    from hyperdata_sidecar.dataplane import DataPlane

    assert not hasattr(DataPlane, "produce")


def mentions_native(node: ast.AST) -> bool:
    """True when ``node`` names anything native: a name, an attribute or a string."""
    for part in ast.walk(node):
        text = part.id if isinstance(part, ast.Name) else part.attr if isinstance(part, ast.Attribute) else None
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            text = part.value
        if text is not None and "native" in text.lower():
            return True
    return False


def test_no_module_outside_the_engines_branches_on_the_native_engine():
    """The engine is an object the others use as it is: ``if native`` lives in engines/ only."""
    engines = PACKAGE / "engines"
    offenders = []
    for path in sources(PACKAGE, AGENTS):
        if engines in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            tests = [node.test] if isinstance(node, ast.If | ast.IfExp | ast.While | ast.Assert) else []
            tests += [case.pattern for case in node.cases] if isinstance(node, ast.Match) else []
            tests += node.ifs if isinstance(node, ast.comprehension) else []
            if any(mentions_native(test) for test in tests):
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
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


def test_every_package_of_the_source_tree_is_one_the_distribution_installs():
    """pyproject.toml lists the packages by name: a new one left out imports from the source tree and
    fails in an installed worker (the image, ``pip install .``)."""
    import tomllib

    repo = PACKAGE.parent
    listed = set(tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(init.parent.relative_to(repo).parts) for init in PACKAGE.rglob("__init__.py")}
    assert found - listed == set()
