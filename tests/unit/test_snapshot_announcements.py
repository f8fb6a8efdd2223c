"""The snapshot announcements: a complete snapshot's event goes to the internal snapshot-events topic
keyed by its path, and at start the published snapshots whose backup is not done are handed to the
snapshot agent again (without their ``published_at``, as the watcher announced them). A recorder
stands in for the topic, plain dicts for the snapshots and backups tables."""

from __future__ import annotations

from typing import Any

from hyperdata_sidecar.snapshots import SnapshotAnnouncements


class Topic:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def send(self, *, key: str, value: dict[str, Any]) -> None:
        self.sent.append((key, value))


def event(height: int) -> dict[str, Any]:
    return {
        "height": height,
        "path": f"periodic_abci_states/20260610/{height}.rmp",
        "date": "20260610",
        "size": 1300,
        "sha256": "ab" * 32,
        "finalized_at": "2026-06-10T22:00:03.000Z",
        "node": "unit",
        "offsets": {"hyperliquid.fills": {"0": 12}},
    }


def published(height: int) -> dict[str, Any]:
    return {**event(height), "published_at": "2026-06-10T22:00:05.000Z"}


async def test_an_event_is_sent_keyed_by_its_path():
    topic = Topic()
    await SnapshotAnnouncements(topic, {}, {}).announce(event(100))  # type: ignore[arg-type]
    assert topic.sent == [(event(100)["path"], event(100))]


async def test_published_snapshots_whose_backup_is_not_done_are_announced_again_without_published_at():
    snapshots = {e["path"]: e for e in (published(100), published(200), published(300), published(400), published(500))}
    backups = {
        event(100)["path"]: {"status": "ok", "revision": 1},
        event(200)["path"]: {"status": "failed", "revision": 1},
        event(300)["path"]: {"status": "parked", "revision": 1},
        event(500)["path"]: {"status": "disabled", "revision": 1},
    }  # 400: no backup recorded yet
    topic = Topic()
    await SnapshotAnnouncements(topic, snapshots, backups).resend_unbacked()  # type: ignore[arg-type]
    assert sorted(topic.sent, key=lambda sent: sent[1]["height"]) == [
        (event(200)["path"], event(200)),
        (event(300)["path"], event(300)),
        (event(400)["path"], event(400)),
    ]


async def test_nothing_is_announced_again_when_every_backup_is_done():
    snapshots = {event(100)["path"]: published(100)}
    topic = Topic()
    await SnapshotAnnouncements(topic, snapshots, {event(100)["path"]: {"status": "ok"}}).resend_unbacked()  # type: ignore[arg-type]
    assert topic.sent == []
