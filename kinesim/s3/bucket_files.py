"""The files of a bucket directory, reached without ever following a symbolic link.

A bucket is a plain directory that other programs (Spark, a user's `cp` or `ln -s`) write into as
well. S3 has no links, and a link can point anywhere: at /etc/passwd, above the bucket, at itself.
So a link anywhere under a bucket's directory is not an object and is never followed: a key whose
path passes through a link (or ends on one) does not exist, listings leave links out, and a write
through a linked directory is refused. Writing a key whose name is a link replaces the link itself,
never the file it points to. FIFOs, sockets and devices are not objects either (and are never
opened in a way that could block).

Serving only the links that resolve inside the bucket was the alternative, and was rejected: what
a link resolves to can change between the check and the open (another program may re-point it),
so no check-then-follow is safe. Instead every path is opened one component at a time, relative
to its parent's descriptor, with O_NOFOLLOW: the kernel refuses a link at the moment of the open.

The bucket's own directory may itself be a link (where a user chose to keep a bucket): only what
is inside it is reached this way.
"""
from __future__ import annotations

import contextlib
import errno
import os
import stat
from typing import BinaryIO, Iterator, Sequence

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NOFOLLOW_DIR = _DIR_FLAGS | os.O_NOFOLLOW
# O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
_NOFOLLOW_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# What "there is no such file" looks like when links are not followed.
_ABSENT = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP)


class LinkInPath(OSError):
    """A component of the path is a symbolic link (and was not followed)."""

    def __init__(self, name: str):
        super().__init__(errno.ELOOP, "symbolic link not followed", name)


def open_directory(bdir: str, segments: Sequence[str], create: bool = False) -> int:
    """A descriptor (the caller closes it) of `bdir/segments...`, no component a link. `create`
    makes missing directories. Raises FileNotFoundError (missing), NotADirectoryError (a component
    is a file) or LinkInPath."""
    fd = os.open(bdir, _DIR_FLAGS)
    try:
        for name in segments:
            child = _open_child_directory(fd, name, create)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_child_directory(fd: int, name: str, create: bool) -> int:
    while True:
        try:
            return os.open(name, _NOFOLLOW_DIR, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                raise
            with contextlib.suppress(FileExistsError):  # made meanwhile: open it
                os.mkdir(name, dir_fd=fd)
        except NotADirectoryError:
            # Linux answers ENOTDIR for a link opened with O_DIRECTORY | O_NOFOLLOW.
            if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                raise LinkInPath(name) from None
            raise


@contextlib.contextmanager
def directory(bdir: str, segments: Sequence[str], create: bool = False) -> Iterator[int]:
    """`open_directory` as a context manager."""
    fd = open_directory(bdir, segments, create)
    try:
        yield fd
    finally:
        os.close(fd)


def _absent(err: OSError) -> bool:
    return isinstance(err, LinkInPath) or err.errno in _ABSENT


def open_file(bdir: str, segments: Sequence[str]) -> BinaryIO | None:
    """The regular file `bdir/segments...` open for reading, or None: missing, not a regular
    file, or reached through a link."""
    try:
        with directory(bdir, segments[:-1]) as parent:
            fd = os.open(segments[-1], _NOFOLLOW_FILE, dir_fd=parent)
    except OSError as err:
        if _absent(err):
            return None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def stat_file(bdir: str, segments: Sequence[str]) -> os.stat_result | None:
    """The regular file's stat, or None as for `open_file`."""
    try:
        with directory(bdir, segments[:-1]) as parent:
            st = os.stat(segments[-1], dir_fd=parent, follow_symlinks=False)
    except OSError as err:
        if _absent(err):
            return None
        raise
    return st if stat.S_ISREG(st.st_mode) else None


def is_directory_at(parent: int, name: str) -> bool:
    """Whether `name` in the directory `parent` is a directory (a link to one is not)."""
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def remove_file(bdir: str, segments: Sequence[str]) -> None:
    """Unlink the regular file `bdir/segments...` if it is there (never through a link)."""
    try:
        with directory(bdir, segments[:-1]) as parent:
            os.unlink(segments[-1], dir_fd=parent)
    except OSError as err:
        if not _absent(err):
            raise


def entries(bdir: str, segments: Sequence[str]) -> list[tuple[str, bool]]:
    """(name, is a directory) of the regular files and directories in `bdir/segments...`; links
    and special files are left out. Empty when that directory cannot be reached or read (a
    listing shows what it can)."""
    found = []
    try:
        with directory(bdir, segments) as fd, os.scandir(fd) as it:  # scandir works on its own copy of fd
            for entry in it:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        found.append((entry.name, True))
                    elif entry.is_file(follow_symlinks=False):
                        found.append((entry.name, False))
                except OSError:  # removed since it was read
                    continue
    except OSError:
        return []
    return found
