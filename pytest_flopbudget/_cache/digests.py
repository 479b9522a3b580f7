"""The facts a cached count keeps about what it read, each computed the same way when it is saved and when it is
checked: a file's sha256 (or its absence, or its kind), a directory listing's names, a library file's size and
mtime, the distributions that own the library files, an environment variable's sha256."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Iterable, Mapping

from pytest_flopbudget._atomic_file import open_regular_file

#: The key under which a record keeps the digest of the whole environment (never a variable's name: it has a NUL).
WHOLE_ENVIRONMENT = "\0environment"


def env_digest(value: str | None) -> str | None:
    """What a record keeps of a variable's value: its sha256 (a token the model read is not written to disk), or
    None when it was unset."""
    if value is None:
        return None
    return "sha256:" + hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()


def environment_digest(environ: Mapping[str, str]) -> str:
    text = "\0".join(f"{k}={v}" for k, v in sorted(environ.items()))
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def modified_since(path: str, started_ns: int) -> bool:
    """Whether `path` changed after the count started (or just before it: file times come from a coarse clock)."""
    try:
        info = os.stat(path)
    except OSError:
        return False
    if not stat.S_ISREG(info.st_mode):  # a probed directory's fact is only that it is one (/tmp changes all the time)
        return False
    return max(info.st_mtime_ns, info.st_ctime_ns) >= started_ns - 50_000_000


#: How a non-regular file's fact starts: its kind follows ("not a regular file: a FIFO").
NOT_REGULAR = "not a regular file: "

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def file_digest(path: str) -> str:
    """sha256 of the file's bytes; "" when it does not exist; "directory"; `NOT_REGULAR` and its kind for a FIFO,
    socket or device, which is never opened (a FIFO would block until a writer comes); "unreadable" otherwise.
    None of these is ever equal to a digest. When `path` itself is a symbolic link, its target follows
    (`"directory -> v4"`): a model that reads where a link points (`os.path.realpath("checkpoints/latest")`) sees
    the link retargeted even when the new target has the same kind or content."""
    try:
        link = os.readlink(path)
    except (OSError, ValueError):
        return _target_digest(path)
    return f"{_target_digest(path)} -> {link}"


def _target_digest(path: str) -> str:
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return ""
    except (OSError, ValueError):
        return "unreadable"
    if stat.S_ISDIR(info.st_mode):
        return "directory"
    if not stat.S_ISREG(info.st_mode):
        return NOT_REGULAR + next((kind for test, kind in _KINDS if test(info.st_mode)), "of an unknown kind")
    digest = hashlib.sha256()
    try:
        with open_regular_file(path) as file:
            while chunk := file.read(1 << 20):
                digest.update(chunk)
    except FileNotFoundError:
        return ""
    except OSError:
        return "unreadable"
    return digest.hexdigest()


def listing_digest(path: str) -> str:
    """The names in a directory, each with what `os.scandir` tells of it without opening it: its kind, a regular
    file's size, a link's target (`entry.is_dir()` and `entry.stat().st_size` are read from the listing, and no
    probe of the file is seen)."""
    try:
        with os.scandir(path) as entries:
            described = sorted(f"{entry.name}\0{_entry_kind(entry)}" for entry in entries)
    except FileNotFoundError:
        return ""
    except OSError:
        return "unreadable"
    return hashlib.sha256("\0".join(described).encode("utf-8", "surrogateescape")).hexdigest()


def _entry_kind(entry: os.DirEntry[str]) -> str:
    try:
        if entry.is_symlink():
            return "link " + os.readlink(entry.path)
        if entry.is_dir(follow_symlinks=False):
            return "directory"
        if entry.is_file(follow_symlinks=False):
            return f"file {entry.stat(follow_symlinks=False).st_size}"
    except OSError:  # removed while it was listed
        return "unreadable"
    return "other"


def library_fact(path: str) -> list[int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return [info.st_size, info.st_mtime_ns]


def owning_distributions(files: Iterable[str], roots: tuple[str, ...]) -> set[str]:
    """The .dist-info directories of the distributions that own `files`, found from each root's top-level names.

    Reading every distribution's RECORD would be exact but slow; a distribution's import names are its
    `top_level.txt`, or else the names in its RECORD's first path components, which we read only for the
    top-level names actually imported.
    """
    wanted: dict[str, set[str]] = {}
    for path in files:
        for root in roots:
            if path.startswith(root):
                top = path[len(root) :].split(os.sep, 1)[0]
                top = top.split(".", 1)[0] if top.endswith((".py", ".so", ".pyd")) else top
                wanted.setdefault(root, set()).add(top)
                break
    found: set[str] = set()
    for root, tops in wanted.items():
        try:
            entries = os.listdir(root)
        except OSError:
            continue
        for entry in entries:
            if not entry.endswith(".dist-info"):
                continue
            owned = _top_level_names(os.path.join(root, entry))
            if owned & tops:
                found.add(os.path.join(root, entry))
    return found


def _top_level_names(dist_info: str) -> set[str]:
    names: set[str] = set()
    with contextlib.suppress(OSError, UnicodeDecodeError):
        with open_regular_file(os.path.join(dist_info, "top_level.txt")) as file:
            names.update(line.strip() for line in file.read().decode("utf-8").splitlines() if line.strip())
        return names
    with contextlib.suppress(OSError, UnicodeDecodeError), open_regular_file(os.path.join(dist_info, "RECORD")) as file:
        for line in file.read().decode("utf-8").splitlines():
            first = line.split(",", 1)[0].split("/", 1)[0]
            if first and not first.endswith((".dist-info", ".data")) and first != "..":
                names.add(first.split(".", 1)[0] if first.endswith((".py", ".so", ".pyd")) else first)
    return names
