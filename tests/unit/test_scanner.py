"""The node's dated trees on disk (``<root>/<YYYYMMDD>/<name>``), on real temporary directories: what a
listing yields, what it passes over and reports once (never following a link), a root that is missing
(reported once per disappearance), and the newest hour file of a tree. Recorders take the reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperdata_sidecar.scanner import DatedTree, newest_hour

RELROOT = "node_fills_streaming/hourly"


class Reports:
    """The two callbacks of a tree: what was passed over, and each time the root was missing."""

    def __init__(self) -> None:
        self.ignored: list[tuple[str, str]] = []
        self.missing: list[str] = []

    def on_ignored(self, relpath: str, reason: str) -> None:
        self.ignored.append((relpath, reason))

    def on_missing(self, path: str) -> None:
        self.missing.append(path)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "watch" / RELROOT


def tree(root: Path, reports: Reports) -> DatedTree:
    return DatedTree(root, RELROOT, on_ignored=reports.on_ignored, on_missing=reports.on_missing)


def touch(path: Path, data: bytes = b"x\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def listed(t: DatedTree) -> list[str]:
    return sorted(relpath for relpath, _entry in t.entries())


def test_every_entry_of_every_date_directory_is_listed_under_the_relative_root(root):
    touch(root / "20260610" / "22")
    touch(root / "20260610" / "23")
    touch(root / "20260611" / "0")
    reports = Reports()
    entries = dict(tree(root, reports).entries())
    assert sorted(entries) == [f"{RELROOT}/20260610/22", f"{RELROOT}/20260610/23", f"{RELROOT}/20260611/0"]
    assert entries[f"{RELROOT}/20260611/0"].path == str(root / "20260611" / "0")
    assert reports.ignored == [] and reports.missing == []


def test_a_symlinked_date_directory_is_not_followed_and_reported_once(root, tmp_path):
    elsewhere = touch(tmp_path / "elsewhere" / "22").parent
    touch(root / "20260610" / "22")
    (root / "20260611").symlink_to(elsewhere, target_is_directory=True)
    reports = Reports()
    t = tree(root, reports)
    assert listed(t) == [f"{RELROOT}/20260610/22"]
    assert listed(t) == [f"{RELROOT}/20260610/22"]
    assert reports.ignored == [(f"{RELROOT}/20260611", "a symlinked date directory is not followed")]


def test_a_plain_file_where_a_date_directory_should_be_is_reported_once(root):
    touch(root / "20260610" / "22")
    touch(root / "20260611")
    reports = Reports()
    t = tree(root, reports)
    assert listed(t) == [f"{RELROOT}/20260610/22"]
    assert listed(t) == [f"{RELROOT}/20260610/22"]
    assert reports.ignored == [(f"{RELROOT}/20260611", "not a date directory")]


def test_a_link_where_a_file_should_be_is_listed_as_a_link_for_the_caller_to_pass_over(root, tmp_path):
    target = touch(tmp_path / "elsewhere" / "22")
    (root / "20260610").mkdir(parents=True)
    (root / "20260610" / "22").symlink_to(target)
    [(relpath, entry)] = list(tree(root, Reports()).entries())
    assert relpath == f"{RELROOT}/20260610/22"
    assert entry.is_symlink() and not entry.is_file(follow_symlinks=False)


def test_what_the_caller_passes_over_is_reported_once_per_path(root):
    reports = Reports()
    t = tree(root, reports)
    t.ignore(f"{RELROOT}/20260610/22", "not a regular file")
    t.ignore(f"{RELROOT}/20260610/22", "not a regular file")
    t.ignore(f"{RELROOT}/20260610/23", "not a regular file")
    assert reports.ignored == [(f"{RELROOT}/20260610/22", "not a regular file"), (f"{RELROOT}/20260610/23", "not a regular file")]


def test_a_missing_root_lists_nothing_is_marked_missing_and_reported_once(root):
    reports = Reports()
    t = tree(root, reports)
    assert listed(t) == [] and t.missing
    assert listed(t) == [] and t.missing
    assert reports.missing == [str(root)]


def test_a_root_that_comes_back_is_no_longer_missing_and_each_disappearance_is_reported_again(root):
    reports = Reports()
    t = tree(root, reports)
    listed(t)
    touch(root / "20260610" / "22")
    assert listed(t) == [f"{RELROOT}/20260610/22"] and not t.missing
    (root / "20260610" / "22").unlink()
    (root / "20260610").rmdir()
    root.rmdir()
    listed(t)
    listed(t)
    assert t.missing and reports.missing == [str(root), str(root)]


def test_a_root_there_at_the_first_look_is_not_reported_missing(root):
    root.mkdir(parents=True)
    reports = Reports()
    t = tree(root, reports)
    assert listed(t) == [] and not t.missing and reports.missing == []


def test_a_missing_root_without_a_missing_callback_is_only_marked(root):
    t = DatedTree(root, RELROOT, on_ignored=Reports().on_ignored)
    assert listed(t) == [] and t.missing


def test_a_date_directory_removed_during_the_listing_is_skipped(root):
    touch(root / "20260610" / "22")
    touch(root / "20260611" / "0")
    listing = tree(root, Reports()).entries()
    first, _entry = next(listing)
    other = "20260611" if "/20260610/" in first else "20260610"
    for child in (root / other).iterdir():
        child.unlink()
    (root / other).rmdir()
    assert list(listing) == []


# -- newest_hour ----------------------------------------------------------------------------------


def test_the_newest_hour_is_the_highest_hour_of_the_newest_date_as_numbers(root):
    for name in ("20260609/23", "20260610/3", "20260610/10", "20260610/9"):
        touch(root / name)
    assert newest_hour(root) == ("20260610", 10)


def test_a_newest_date_without_an_hour_file_falls_back_to_the_one_before(root):
    touch(root / "20260610" / "5")
    (root / "20260611").mkdir()
    touch(root / "20260612" / "notes.txt")
    assert newest_hour(root) == ("20260610", 5)


def test_names_that_are_not_dates_are_passed_over(root):
    touch(root / "20260610" / "5")
    touch(root / "current_" / "7")
    touch(root / "202606110" / "8")
    assert newest_hour(root) == ("20260610", 5)


def test_no_hour_file_or_no_root_is_no_newest_hour(root):
    assert newest_hour(root) is None
    (root / "20260610").mkdir(parents=True)
    assert newest_hour(root) is None


def test_a_plain_file_named_like_a_newer_date_is_passed_over(root):
    touch(root / "20260610" / "5")
    touch(root / "20260611")
    assert newest_hour(root) == ("20260610", 5)
