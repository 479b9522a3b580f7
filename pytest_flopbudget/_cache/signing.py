"""The secret that signs count-cache records, so that only records this user wrote on this machine are believed.

A record is a promise: "this model counts so, while these facts hold". Anyone who can put a file in
`.flopbudget_cache/` could otherwise make that promise for us: a record committed with `git add -f`, or planted
by a pull request, would be a permanent hit with whatever figures it claims. Each record therefore carries an
HMAC-SHA256 of its content (`count_cache.canonical`) under a key that never lives in the project:
`$XDG_CACHE_HOME/flopbudget/key` (default `~/.cache/flopbudget/key`), 32 random bytes made on first use,
readable by its owner only. A record from another machine, another user or another clone's history does not
verify, and is recounted.

The key is used only if it is a regular file owned by this user that nobody else can read or write; otherwise the
cache is off for the run, with one warning naming the file (a key others can read can sign records for us).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from pytest_flopbudget._atomic_file import FileTooLargeError, NotRegularFileError, read_regular_file

KEY_BYTES = 32


class KeyProblem(Exception):
    """The key cannot be made or is not safe to use; the message names the file and what is wrong."""


def key_path(env: Mapping[str, str]) -> Path:
    """`$XDG_CACHE_HOME/flopbudget/key`, else `~/.cache/flopbudget/key` (a relative XDG_CACHE_HOME is ignored, as
    the XDG spec says)."""
    base = env.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".cache"
    return root / "flopbudget" / "key"


def load_key(path: Path) -> bytes:
    """The key at `path`, made first if there is none; raises `KeyProblem` with a one-line reason otherwise."""
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    try:
        _create(path)
        return _read(path)
    except OSError as exc:
        raise KeyProblem(f"cannot make the count cache's key {path}: {exc.strerror or exc}") from None


def _read(path: Path) -> bytes:
    def private(info: os.stat_result) -> None:
        if hasattr(os, "getuid") and (info.st_uid != os.getuid() or info.st_mode & 0o077):
            raise KeyProblem(
                f"the count cache's key {path} is readable or writable by others (or not yours): "
                "delete it and a new one is made"
            )

    try:
        raw = read_regular_file(path, 4 * KEY_BYTES + 1, follow_symlinks=False, check=private)
    except FileNotFoundError:
        raise
    except NotRegularFileError:
        raise KeyProblem(f"the count cache's key {path} is not a regular file") from None
    except FileTooLargeError:
        raw = b""  # no key is that long: damaged
    except OSError as exc:
        raise KeyProblem(f"cannot read the count cache's key {path}: {exc.strerror or exc}") from None
    text = raw.decode("ascii", "replace").strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        raise KeyProblem(f"the count cache's key {path} is damaged: delete it and a new one is made")
    return key


def _create(path: Path) -> None:
    """Write a fresh key under a temporary name and link it into place: concurrent first runs agree on one key,
    and no run ever reads a half-written one."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".key.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as file:
            file.write(secrets.token_hex(KEY_BYTES) + "\n")
            file.flush()
            os.fsync(file.fileno())
        with contextlib.suppress(FileExistsError):  # another run made one first: use that
            os.link(temporary, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def sign(key: bytes, body: bytes) -> str:
    return hmac.new(key, body, hashlib.sha256).hexdigest()


def verifies(key: bytes, body: bytes, signature: str) -> bool:
    return hmac.compare_digest(sign(key, body), signature)
