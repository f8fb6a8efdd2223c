"""A content-addressed backup sink: every sealed file is stored once, as ``<root>/sha256/<digest>``.

Its root is ``CAS_SINK_ROOT`` (the sidecar's BACKUP_DIR when unset); refs are ``cas:<digest>``.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
from pathlib import Path

from hyperdata_sidecar.backup import BackupError, BackupSink
from hyperdata_sidecar.config import ConfigError


class ContentAddressedSink(BackupSink):
    name = "cas"

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def create(cls, backup_dir: Path) -> ContentAddressedSink:
        root = Path(os.environ.get("CAS_SINK_ROOT") or backup_dir)
        if not root.is_absolute():
            raise ConfigError("CAS_SINK_ROOT", f"must be an absolute path (got {str(root)!r})")
        return cls(root)

    async def find_existing(self, relpath: str, sha256: str) -> str | None:
        return f"cas:{sha256}" if self._object(sha256).is_file() else None

    async def backup(self, local_path: Path, *, relpath: str, sha256: str) -> str:
        await asyncio.to_thread(self._store, local_path, sha256)
        return f"cas:{sha256}"

    def _object(self, sha256: str) -> Path:
        return self.root / "sha256" / sha256

    def _store(self, local_path: Path, sha256: str) -> None:
        target = self._object(sha256)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        try:
            shutil.copyfile(local_path, partial)
        except FileNotFoundError as err:
            raise BackupError("source_missing", str(err)) from err
        except OSError as err:
            raise BackupError("io_error", str(err)) from err
        with open(partial, "rb") as copy:
            copied = hashlib.file_digest(copy, "sha256").hexdigest()
        if copied != sha256:
            partial.unlink()
            raise BackupError("hash_mismatch", f"{local_path} copied as {copied}, the seal says {sha256}")
        partial.rename(target)
