"""Write a whole file or nothing, never replace what is not a regular file, and read only regular files.

Every file this tool writes (baselines, `--output`, `--report` files, the count cache, `init`'s pyproject.toml)
goes through `write_atomic`: the text goes to a temporary file beside the target, is flushed to disk, and is then
renamed over the target, so a reader or an interrupted run sees the old file or the new one, never half of each.

A rename replaces whatever has the name, so the target is looked at first:

* a character device or a FIFO (`--output /dev/stdout`, `/dev/null`, a named pipe read by another process) is
  written in place, as a shell redirection would: renaming onto it would, for root, replace `/dev/null` with a
  regular file. A write that fails there (`/dev/full`: no space left; a FIFO nobody reads) is an `OSError`
  naming the reason;
* anything else that is not a regular file (a directory, a socket, a block device) is refused with an `OSError`;
* a regular file keeps its permission bits (a 0600 pyproject.toml stays private) and, when root writes it, its
  owner and group; a new file gets the usual mode (0666 less the umask), not `mkstemp`'s 0600;
* a symbolic link to a regular file is itself replaced, never written through: a link committed to a repository
  (`gl-code-quality.json -> ~/.ssh/authorized_keys`) cannot make a CI report or a cache record land elsewhere.
  A caller that means to edit the link's target (`init` editing a symlinked pyproject.toml) passes
  `real_target(path)`, the end of the chain of links, each relative one taken from its own link's directory.

Every file this tool reads that a user or another process could have replaced with something else (a baseline,
`init`'s pyproject.toml, a count-cache record or key, a file a cached count depended on) is opened by
`open_regular_file` or read by `read_regular_file`: a FIFO, a socket, a device or a directory is refused before
it is opened and again on the open descriptor (it may be swapped in between), which is opened non-blocking, so a
FIFO never hangs a run and `/dev/zero` is never read for ever; `read_regular_file` reads at most a given size.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
import time
from pathlib import Path
from typing import BinaryIO, Callable

__all__ = [
    "FileTooLargeError",
    "NotRegularFileError",
    "open_regular_file",
    "read_regular_file",
    "real_target",
    "write_atomic",
    "write_bytes_atomic",
]


#: How long a write to a FIFO waits for a reader to open it before it fails, rather than blocking for ever.
FIFO_READER_WAIT = 5.0


class NotRegularFileError(OSError):
    """The path is not a regular file where one is needed: a target no file should replace (a directory, a socket
    or a block device), or a file to read that is a FIFO, a socket, a device or a directory."""


class FileTooLargeError(OSError):
    """The file to read holds more bytes than its reader's limit."""


def write_atomic(path: Path, text: str) -> None:
    """Write `text` (UTF-8, newlines as given) to `path`; see the module docstring for what `path` may be."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """`write_atomic` for bytes."""
    try:
        info: os.stat_result | None = os.stat(path)  # follows links: /dev/stdout is what fd 1 is
    except (FileNotFoundError, NotADirectoryError):
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode):
        if stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode):
            _write_in_place(path, data)
            return
        raise NotRegularFileError(errno.EINVAL, f"not a regular file ({_kind(info.st_mode)}); give a file path")
    target = Path(os.path.abspath(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        if info is None or os.path.islink(target):  # a new file, or a link replaced by one: the usual mode
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a committed file should get the usual mode
        else:
            _copy_owner_and_mode(tmp, info)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def real_target(path: Path) -> Path:
    """The file a write to `path` must replace: `path` itself, or the end of its chain of symbolic links, each
    relative link taken from the directory of the link that holds it (a dangling link's missing target too)."""
    seen = 0
    current = Path(os.path.abspath(path))
    while current.is_symlink():
        seen += 1
        if seen > 40:
            raise OSError(errno.ELOOP, "too many levels of symbolic links")
        link = Path(os.readlink(current))
        current = Path(os.path.abspath(current.parent / link))
    return current


def open_regular_file(path: str | os.PathLike[str], *, follow_symlinks: bool = True) -> BinaryIO:
    """`path` opened for binary reading if it is a regular file, else `NotRegularFileError` (see the module
    docstring); the `OSError` of `stat` or `open` otherwise (`FileNotFoundError`, `PermissionError`, ...).
    With `follow_symlinks=False` a symbolic link is not followed: opening it fails (`ELOOP`)."""
    info = os.stat(path, follow_symlinks=follow_symlinks)
    if not stat.S_ISREG(info.st_mode) and not stat.S_ISLNK(info.st_mode):  # a link: the open below refuses it
        raise NotRegularFileError(errno.EINVAL, f"not a regular file ({_kind(info.st_mode)})")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    flags |= getattr(os, "O_CLOEXEC", 0) | (0 if follow_symlinks else getattr(os, "O_NOFOLLOW", 0))
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # swapped in between the two looks
            raise NotRegularFileError(errno.EINVAL, f"not a regular file ({_kind(info.st_mode)})")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular_file(
    path: str | os.PathLike[str],
    limit: int,
    *,
    follow_symlinks: bool = True,
    check: Callable[[os.stat_result], None] | None = None,
) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them: `FileTooLargeError` when it holds more (only
    `limit + 1` bytes are ever read), `NotRegularFileError` and the other `OSError`s as `open_regular_file`.
    `check`, if given, sees the open file's status before a byte is read and may raise (an owner check)."""
    with open_regular_file(path, follow_symlinks=follow_symlinks) as file:
        if check is not None:
            check(os.fstat(file.fileno()))
        data = file.read(limit + 1)
    if len(data) > limit:
        raise FileTooLargeError(errno.EFBIG, f"larger than {limit} bytes")
    return data


def _write_in_place(path: Path, data: bytes) -> None:
    """A device or FIFO: opened for writing as it is (never created, truncated or renamed) and written whole.

    Opened non-blocking, so a FIFO nobody reads is an error (`ENXIO`: "No such device or address") after
    `FIFO_READER_WAIT` seconds instead of a wait forever; then switched back to blocking, so a slow reader gets
    every byte.
    """
    nonblock = getattr(os, "O_NONBLOCK", 0)
    flags = os.O_WRONLY | nonblock | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    deadline = time.monotonic() + FIFO_READER_WAIT
    while True:
        try:
            fd = os.open(path, flags)
            break
        except OSError as exc:  # ENXIO: a FIFO with no reader yet (one may be starting)
            if exc.errno != errno.ENXIO or time.monotonic() >= deadline:
                raise
            time.sleep(0.02)
    try:
        if nonblock:
            os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            if written <= 0:  # pragma: no cover - os.write raises rather than returning 0 on a full device
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            view = view[written:]
    finally:
        os.close(fd)


def _copy_owner_and_mode(tmp: str, info: os.stat_result) -> None:
    """The replaced file's permission bits, and for root (who alone may give a file away) its owner and group."""
    if hasattr(os, "geteuid") and os.geteuid() == 0 and hasattr(os, "chown"):
        with contextlib.suppress(OSError):
            os.chown(tmp, info.st_uid, info.st_gid)
    os.chmod(tmp, stat.S_IMODE(info.st_mode))


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    return "a special file"


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
