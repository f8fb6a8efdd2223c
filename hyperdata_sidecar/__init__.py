"""hyperdata-sidecar: streams a Hyperliquid node's hourly JSONL files to Kafka (see README.md).

``faust -A hyperdata_sidecar worker`` finds the app as ``hyperdata_sidecar.app`` (built in
``hyperdata_sidecar.standalone``). It is created on first access, so the pure core and the tools
import without reading any configuration. The module is not called ``app``: an imported submodule
of that name would replace this attribute.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from typing import Any

# The agents live in the repository's top-level agents/, which pyproject.toml's package-dir installs
# as hyperdata_sidecar.agents. An install therefore has agents/ inside this package; a source tree
# has it one level up. A source tree is imported not only by an editable install: `faust -A
# hyperdata_sidecar` puts the working directory first on sys.path, so in the repository root it
# imports ./hyperdata_sidecar even when the project is installed (pip install ., the image built
# from a copy of the sources). For that case the same mapping is made here, for that one name.
_PACKAGE_DIR = Path(__file__).resolve().parent
_SOURCE_TREE_AGENTS = _PACKAGE_DIR.parent / "agents"


class SourceTreeAgentsFinder(importlib.abc.MetaPathFinder):
    """Finds ``hyperdata_sidecar.agents`` in the source tree's top-level ``agents/``."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != f"{__name__}.agents":
            return None
        return importlib.util.spec_from_file_location(
            fullname, _SOURCE_TREE_AGENTS / "__init__.py", submodule_search_locations=[str(_SOURCE_TREE_AGENTS)]
        )


if not (_PACKAGE_DIR / "agents").is_dir() and (_SOURCE_TREE_AGENTS / "__init__.py").is_file():
    sys.meta_path.append(SourceTreeAgentsFinder())


def __getattr__(name: str) -> Any:
    if name == "app":
        from hyperdata_sidecar.standalone import app

        return app
    raise AttributeError(f"module 'hyperdata_sidecar' has no attribute {name!r}")
