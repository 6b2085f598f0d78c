"""Opening files beneath a directory without following links that appeared after the check.

:meth:`Workdir.resolve` decides which file a path names; a command running at the same time
could then swap a directory on the way for a symlink to somewhere else. Every open here starts
from a descriptor of the base directory and refuses any symlink met on the way: with the
kernel's ``openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`` where it has it (Linux 5.6+), else
one ``O_NOFOLLOW`` component at a time through directory descriptors. Writes go to a temporary
file in the already-open parent directory and are renamed over the target, so a hard link, a
FIFO or a swapped link at the target is replaced, never written through.
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path, PurePath

import attrs

_SYS_OPENAT2 = 437  # the same number on every architecture (the generic syscall table)
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_READ_CHUNK = 1 << 20


class _OpenHow(ctypes.Structure):
    _fields_ = (
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    )


@attrs.define
class _Openat2:
    """Whether this kernel has openat2, found out on first use."""

    available: bool | None = None
    libc: ctypes.CDLL | None = None

    def call(self, dir_fd: int, path: str, flags: int, mode: int) -> int | None:
        """The new descriptor, or None when the kernel has no openat2 (then walk instead)."""
        if self.available is False:
            return None
        if self.libc is None:
            try:
                self.libc = ctypes.CDLL(None, use_errno=True)
            except OSError:
                self.available = False
                return None
        how = _OpenHow(
            flags=flags,
            # openat2, unlike open, refuses a mode without O_CREAT.
            mode=mode if flags & os.O_CREAT else 0,
            resolve=_RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS,
        )
        fd = int(
            self.libc.syscall(
                _SYS_OPENAT2,
                ctypes.c_int(dir_fd),
                ctypes.c_char_p(os.fsencode(path)),
                ctypes.byref(how),
                ctypes.c_size_t(ctypes.sizeof(how)),
            )
        )
        if fd >= 0:
            self.available = True
            return fd
        code = ctypes.get_errno()
        if code in (errno.ENOSYS, errno.EPERM) and self.available is None:
            # No openat2 here (old kernel, or a seccomp filter that answers EPERM).
            self.available = False
            return None
        raise OSError(code, os.strerror(code), path)


_openat2 = _Openat2()


def open_beneath(base: Path, relative: PurePath, flags: int, mode: int = 0o666) -> int:
    """Open ``base/relative`` refusing any symlink on the way; raise OSError (ELOOP, EXDEV)."""
    flags |= os.O_CLOEXEC
    with _directory(base) as base_fd:
        if str(relative) in ("", "."):
            return os.open(".", flags, mode, dir_fd=base_fd)
        fd = _openat2.call(base_fd, str(relative), flags, mode)
        if fd is not None:
            return fd
        return _walk(base_fd, relative.parts, flags, mode)


def openat2_available(directory: Path) -> bool:
    """Whether this kernel resolves beneath a directory itself (else opens walk)."""
    with _directory(directory) as fd:
        try:
            opened = _openat2.call(fd, ".", os.O_RDONLY | os.O_CLOEXEC, 0)
        except OSError:
            return False
    if opened is None:
        return False
    os.close(opened)
    return True


def _walk(base_fd: int, parts: tuple[str, ...], flags: int, mode: int) -> int:
    fd = os.dup(base_fd)
    try:
        for part in parts[:-1]:
            if part == "..":
                raise OSError(errno.EXDEV, "'..' is not followed", part)
            step = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = step
        return os.open(parts[-1], flags | os.O_NOFOLLOW, mode, dir_fd=fd)
    finally:
        os.close(fd)


@contextmanager
def _directory(path: Path) -> Iterator[int]:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


@contextmanager
def parent_directory(base: Path, relative: PurePath) -> Iterator[int]:
    """A descriptor of the directory holding ``relative``, creating missing ones beneath base."""
    made = PurePath()
    fd = open_beneath(base, made, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in relative.parent.parts:
            made = made / part
            try:
                step = open_beneath(base, made, os.O_RDONLY | os.O_DIRECTORY)
            except FileNotFoundError:
                os.mkdir(part, dir_fd=fd)
                step = open_beneath(base, made, os.O_RDONLY | os.O_DIRECTORY)
            os.close(fd)
            fd = step
        yield fd
    finally:
        os.close(fd)


@attrs.frozen
class Opened:
    """A regular file read whole through one descriptor, with what fstat said about it."""

    data: bytes
    info: os.stat_result


class NotRegular(Exception):
    """The path names a directory, a FIFO, a device or a socket; ``kind`` says which."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


class TooLarge(Exception):
    """The file is over the size limit (checked on the open descriptor)."""


class HardLinked(Exception):
    """The file has more than one name, so it may be a file outside the work directory too."""

    def __init__(self, links: int) -> None:
        super().__init__(links)
        self.links = links


def read_regular(base: Path, relative: PurePath, limit: int) -> Opened:
    """Read a regular file with a single name beneath ``base``.

    The checks and the read share one descriptor, so nothing can be swapped between them.
    """
    # O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
    fd = open_beneath(base, relative, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegular(_kind(info.st_mode))
        if info.st_nlink > 1:
            raise HardLinked(info.st_nlink)
        if info.st_size > limit:
            raise TooLarge()
        chunks = []
        total = 0
        while chunk := os.read(fd, _READ_CHUNK):
            total += len(chunk)
            if total > limit:  # it grew while we read
                raise TooLarge()
            chunks.append(chunk)
        return Opened(b"".join(chunks), info)
    finally:
        os.close(fd)


def replace_file(base: Path, relative: PurePath, data: bytes) -> None:
    """Write ``data`` to a temporary file beside the target and rename it over the target.

    An existing regular file keeps its permission bits. A directory, FIFO, device or socket at
    the target is refused (:class:`NotRegular`) and left as it was.
    """
    with parent_directory(base, relative) as parent:
        name = relative.name
        try:
            existing: os.stat_result | None = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            existing = None
        if existing is not None and not stat.S_ISREG(existing.st_mode):
            raise NotRegular(_kind(existing.st_mode))
        temporary = f".orchestrator-{secrets.token_hex(6)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temporary, flags, 0o666, dir_fd=parent)
        try:
            try:
                if existing is not None:
                    os.fchmod(fd, stat.S_IMODE(existing.st_mode))
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.rename(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            with suppress(OSError):
                os.unlink(temporary, dir_fd=parent)
            raise


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"
