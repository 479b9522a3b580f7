"""`write_atomic`: a whole file or nothing, and never a rename onto what is not a regular file; `read_regular_file`:
only a regular file is read, at most a given size, and a FIFO or a device never hangs the reader.

We run as root here, so a rename onto `/dev/null` would succeed and replace the device node: every test that
writes to a device asserts that it is still a character device afterwards.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from pytest_flopbudget._atomic_file import (
    FileTooLargeError,
    NotRegularFileError,
    open_regular_file,
    read_regular_file,
    real_target,
    write_atomic,
)

needs_dev = pytest.mark.skipif(not os.path.exists("/dev/null") or not os.path.exists("/dev/full"), reason="Linux")


@needs_dev
def test_dev_null_is_written_in_place_and_stays_a_device() -> None:
    before = os.stat("/dev/null")
    write_atomic(Path("/dev/null"), "discarded\n")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino


@needs_dev
def test_dev_full_is_an_os_error_saying_the_device_is_full() -> None:
    with pytest.raises(OSError) as exc:
        write_atomic(Path("/dev/full"), "x" * 10)
    assert exc.value.strerror == os.strerror(28)  # ENOSPC: "No space left on device"
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_a_fifo_is_written_in_place_for_its_reader(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as handle:
            received.append(handle.read())

    reader = threading.Thread(target=read)
    reader.start()
    write_atomic(fifo, "through the pipe\n")
    reader.join(timeout=30)
    assert received == [b"through the pipe\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no temporary file left beside it


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NotRegularFileError, match=r"not a regular file \(a directory\)"):
        write_atomic(tmp_path, "x")
    assert tmp_path.is_dir()


def test_a_socket_is_refused(tmp_path: Path) -> None:
    import socket

    path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
        with pytest.raises(NotRegularFileError, match=r"a socket"):
            write_atomic(path, "x")
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
    finally:
        server.close()


def test_an_existing_file_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "private.toml"
    path.write_text("old\n")
    path.chmod(0o600)
    write_atomic(path, "new\n")
    assert path.read_text() == "new\n" and stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="only root can give a file away")
def test_root_keeps_an_existing_files_owner(tmp_path: Path) -> None:
    path = tmp_path / "theirs.json"
    path.write_text("old\n")
    os.chown(path, 4321, 8765)
    write_atomic(path, "new\n")
    assert (path.stat().st_uid, path.stat().st_gid) == (4321, 8765)


def test_a_new_file_gets_the_usual_mode(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "sub" / "new.json", "{}\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "sub" / "new.json").stat().st_mode) == 0o644


def test_real_target_follows_a_chain_of_relative_symlinks(tmp_path: Path) -> None:
    """`a/link -> ../b/link2 -> real.toml`: each relative target is taken from its own link's directory."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    real = tmp_path / "b" / "real.toml"
    real.write_text("old\n")
    (tmp_path / "b" / "link2").symlink_to("real.toml")
    link = tmp_path / "a" / "link"
    link.symlink_to(Path("..") / "b" / "link2")
    assert real_target(link) == real
    assert real_target(tmp_path / "a" / "dangling") == tmp_path / "a" / "dangling"
    write_atomic(real_target(link), "new\n")
    assert real.read_text() == "new\n" and link.is_symlink()


def test_a_symlink_is_replaced_not_written_through(tmp_path: Path) -> None:
    """A link committed to a checkout cannot redirect a report or a cache record to a file outside it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "authorized_keys"
    victim.write_text("ssh-ed25519 AAAA...\n")
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    report = checkout / "gl-code-quality.json"
    report.symlink_to(victim)
    write_atomic(report, "[]\n")
    assert victim.read_text() == "ssh-ed25519 AAAA...\n"
    assert not report.is_symlink() and report.read_text() == "[]\n"


def test_a_symlink_loop_is_an_os_error(tmp_path: Path) -> None:
    (tmp_path / "x").symlink_to("y")
    (tmp_path / "y").symlink_to("x")
    with pytest.raises(OSError):
        write_atomic(tmp_path / "x", "loop")


def test_a_fifo_nobody_reads_is_an_error_soon_not_a_hang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pytest_flopbudget._atomic_file.FIFO_READER_WAIT", 0.2)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OSError) as exc:
        write_atomic(fifo, "nobody listens\n")
    assert exc.value.errno == 6  # ENXIO: no reader
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


# --- reading: only regular files ------------------------------------------------------------------------------


def test_read_regular_file_reads_a_file_up_to_its_limit(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"12345")
    assert read_regular_file(path, 5) == b"12345"
    assert read_regular_file(str(path), 100) == b"12345"
    with pytest.raises(FileTooLargeError):
        read_regular_file(path, 4)


def test_read_regular_file_refuses_a_fifo_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # no writer: a plain open for reading would block for ever
    with pytest.raises(NotRegularFileError, match="a FIFO"):
        read_regular_file(fifo, 10)


def test_a_fifo_swapped_in_after_the_first_look_is_refused_on_the_open_descriptor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    regular = os.stat(__file__)
    monkeypatch.setattr(os, "stat", lambda path, **_: regular)  # the first look saw a regular file
    with pytest.raises(NotRegularFileError):
        read_regular_file(fifo, 10)


@needs_dev
def test_a_device_is_refused_before_it_is_read(tmp_path: Path) -> None:
    link = tmp_path / "baseline.json"
    link.symlink_to("/dev/zero")  # a plain read would never end
    with pytest.raises(NotRegularFileError, match="a character device"):
        read_regular_file(link, 10)


def test_a_directory_is_not_read(tmp_path: Path) -> None:
    with pytest.raises(NotRegularFileError, match="a directory"):
        read_regular_file(tmp_path, 10)


def test_a_missing_file_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_regular_file(tmp_path / "missing", 10)


def test_a_symlink_is_followed_unless_told_not_to(tmp_path: Path) -> None:
    (tmp_path / "target").write_bytes(b"key")
    link = tmp_path / "link"
    link.symlink_to("target")
    assert read_regular_file(link, 10) == b"key"
    with pytest.raises(OSError) as exc:
        read_regular_file(link, 10, follow_symlinks=False)
    assert not isinstance(exc.value, NotRegularFileError)  # the open refuses it (ELOOP), as O_NOFOLLOW does


def test_check_sees_the_open_files_status_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_bytes(b"secret")
    path.chmod(0o644)
    seen: list[int] = []

    def private(info: os.stat_result) -> None:
        seen.append(stat.S_IMODE(info.st_mode))
        if info.st_mode & 0o077:
            raise PermissionError("readable by others")

    with pytest.raises(PermissionError, match="readable by others"):
        read_regular_file(path, 10, check=private)
    path.chmod(0o600)
    assert read_regular_file(path, 10, check=private) == b"secret"
    assert seen == [0o644, 0o600]


def test_open_regular_file_streams_a_file_of_any_size(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_bytes(b"x" * (3 << 20))
    with open_regular_file(path) as file:
        assert sum(len(chunk) for chunk in iter(lambda: file.read(1 << 20), b"")) == 3 << 20
