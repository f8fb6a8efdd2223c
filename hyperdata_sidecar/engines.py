"""The line engines and the choice between them (``SIDECAR_ENGINE``).

Two implementations of one job (split, inspect, sequence and publish the lines of a read): the
``python`` engine, part of this package and the reference, and the ``native`` one, the separate
distribution ``hyperdata-sidecar-engine`` (module ``hyperdata_sidecar_engine``, built from engine/).
As with psycopg's ``PSYCOPG_IMPL``, ``auto`` takes the native engine when it imports and the Python
one otherwise, and ``native`` refuses to go on without it. The worker chooses once, when it starts.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib.metadata import version
from typing import Literal

ENGINE_CHOICES = ("auto", "native", "python")
NATIVE_MODULE = "hyperdata_sidecar_engine"
SIDECAR_DISTRIBUTION = "hyperdata-sidecar"
HOW_TO_GET_NATIVE = "build it with `make engine`, or `pip install ./engine` with a Rust toolchain; or set SIDECAR_ENGINE=python"


class EngineUnavailable(RuntimeError):
    """The native engine was asked for and does not import; ``str(err)`` is one line saying what is
    missing and how to get it."""


@dataclass(frozen=True)
class Engine:
    """The line engine in use. ``version`` is the native module's ``__version__`` (the crate's) or
    the sidecar's own; ``fallback_reason`` says why ``auto`` did not get an installed native engine."""

    name: Literal["native", "python"]
    version: str
    fallback_reason: str | None = None

    def label(self) -> str:
        """``native 0.1.0``: how the startup line and the status page name it."""
        return f"{self.name} {self.version}"


def select(wanted: str) -> Engine:
    """The engine ``wanted`` (one of :data:`ENGINE_CHOICES`) asks for.

    ``auto``: native when ``hyperdata_sidecar_engine`` imports; python when it is not installed; python
    with a ``fallback_reason`` when it is installed but fails to import. ``native``: native, or raises
    :class:`EngineUnavailable`. ``python``: python, without looking for the native one.
    """
    if wanted not in ENGINE_CHOICES:
        raise ValueError(f"engine must be one of {', '.join(ENGINE_CHOICES)}, not {wanted!r}")
    if wanted == "python":
        return _python_engine()
    try:
        return Engine("native", _native_version())
    except _NativeMissing as missing:
        if wanted == "native":
            raise EngineUnavailable(f"{missing}: {HOW_TO_GET_NATIVE}") from None
        # Not installed is the normal case of `pip install .`; installed and broken must be said.
        return _python_engine(fallback_reason=str(missing) if missing.installed else None)


def _python_engine(fallback_reason: str | None = None) -> Engine:
    return Engine("python", version(SIDECAR_DISTRIBUTION), fallback_reason)


class _NativeMissing(Exception):
    """Why the native engine cannot be used; ``installed``: a module of its name was found."""

    def __init__(self, reason: str, *, installed: bool) -> None:
        super().__init__(reason)
        self.installed = installed


def _native_version() -> str:
    """Import the native engine and return its version; raises :class:`_NativeMissing`."""
    try:
        module = importlib.import_module(NATIVE_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name == NATIVE_MODULE:
            raise _NativeMissing(f"the native line engine (module {NATIVE_MODULE}) is not installed", installed=False) from None
        raise _broken(exc) from None
    # A .so that is not one (ImportError from dlopen), one built for another Python or platform, an
    # initialisation that failed: whatever it is, the engine is installed and cannot be used.
    except Exception as exc:  # noqa: BLE001 - anything a compiled module's loading can raise
        raise _broken(exc) from None
    native_version = getattr(module, "__version__", None)
    if not isinstance(native_version, str):
        where = getattr(module, "__file__", None) or "?"
        raise _NativeMissing(f"the module {NATIVE_MODULE} at {where} is not the line engine (no __version__)", installed=True)
    return native_version


def _broken(exc: BaseException) -> _NativeMissing:
    # One line: a loader's message may span several.
    error = " ".join(f"{type(exc).__name__}: {exc}".split())
    return _NativeMissing(
        f"the native line engine (module {NATIVE_MODULE}) is installed but does not import ({error})", installed=True
    )
