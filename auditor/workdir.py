"""Work directories: where one audit keeps its cut points and drill-downs while it runs.

A work dir is removed when its run ends (or when the process exits). A process killed
before that (``SIGKILL``, the kernel's OOM killer, a scheduler's timeout) cannot remove
it, and on a large input it holds gigabytes of Parquet. So every work dir holds an owner
file on which its process keeps an exclusive ``flock(2)`` while the dir lives: the kernel
releases it when the process ends, however it ends. Before making a new work dir,
:func:`new_work_dir` removes each sibling whose owner lock it can take, i.e. whose process
is gone and that names this host. A dir it cannot judge is left alone: one whose owner
file cannot be locked (a file system without ``flock``), one another host made (on a
shared mount, that host's next run sweeps it), one kept for inspection
(``AUDITOR_KEEP_WORK_DIR=1``), one without an owner file (being created this instant, or
left by a version before owner files) unless it is older than :data:`UNOWNED_MAX_AGE_S`.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import logging
import os
import shutil
import socket
import tempfile
import time

logger = logging.getLogger(__name__)

PREFIX = "auditor-work-"
OWNER_FILE = ".owner"  # locked by the process that made the dir, for as long as it lives
KEEP_FILE = ".keep"  # the dir is kept for inspection: never swept
KEEP_ENV = "AUDITOR_KEEP_WORK_DIR"
#: A work dir without an owner file older than this is stale (a day: no audit creates its
#: owner file that late, and a dir left by a version without owner files is that old).
UNOWNED_MAX_AGE_S = 24 * 3600.0

#: path -> the open owner file whose lock this process holds (closed when the dir goes).
_held: dict[str, int] = {}


def keep_work_dirs() -> bool:
    """True when ``AUDITOR_KEEP_WORK_DIR=1``: work dirs are left for inspection."""
    return os.environ.get(KEEP_ENV, "") not in ("", "0")


def new_work_dir(parent: str | None = None) -> str:
    """A fresh directory for one audit's cut points under ``parent`` (None: the system's
    temporary folder), removed when the process exits (kept when ``AUDITOR_KEEP_WORK_DIR=1``,
    to inspect every stored intermediate). Work dirs under ``parent`` whose process has
    ended without removing them are removed first (:func:`sweep`)."""
    if parent is not None:
        os.makedirs(parent, exist_ok=True)
    sweep(parent)
    path = tempfile.mkdtemp(prefix=PREFIX, dir=parent)
    if keep_work_dirs():
        with open(os.path.join(path, KEEP_FILE), "w", encoding="utf-8") as f:
            f.write(f"kept by pid {os.getpid()} on {socket.gethostname()} ({KEEP_ENV} is set)\n")
        logger.warning("keeping the work dir %s (%s is set)", path, KEEP_ENV)
        return path
    # Locked under another name, then renamed: a sweep never finds the owner file unlocked
    # (the lock belongs to the open file, which the rename keeps).
    pending = os.path.join(path, OWNER_FILE + ".new")
    fd = os.open(pending, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # a file system without flock: the dir is never swept, as before
        pass
    os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode())
    os.rename(pending, os.path.join(path, OWNER_FILE))
    _held[path] = fd
    atexit.register(remove_work_dir, path)
    return path


def remove_work_dir(path: str) -> None:
    """Remove a work dir this process made (no-op when already gone or kept)."""
    if keep_work_dirs() or os.path.exists(os.path.join(path, KEEP_FILE)):
        return
    shutil.rmtree(path, ignore_errors=True)
    fd = _held.pop(path, None)
    if fd is not None:
        os.close(fd)


def sweep(parent: str | None = None) -> list[str]:
    """Remove the work dirs under ``parent`` (None: the system's temporary folder) whose
    process has ended without removing them; returns their paths."""
    root = parent if parent is not None else tempfile.gettempdir()
    try:
        names = [n for n in os.listdir(root) if n.startswith(PREFIX)]
    except OSError:
        return []
    removed = []
    for name in sorted(names):
        path = os.path.join(root, name)
        if path in _held or not os.path.isdir(path) or os.path.islink(path):
            continue
        if _stale(path):
            removed.append(path)
    if removed:
        logger.info("removed %d work dir(s) left by audits that ended without removing them: %s",
                    len(removed), ", ".join(removed))
    return removed


def _stale(path: str) -> bool:
    """Remove ``path`` when its owner process is gone; True when removed."""
    if os.path.exists(os.path.join(path, KEEP_FILE)):
        return False
    try:
        fd = os.open(os.path.join(path, OWNER_FILE), os.O_RDWR)
    except FileNotFoundError:
        try:
            old = time.time() - os.stat(path).st_mtime > UNOWNED_MAX_AGE_S
        except OSError:
            return False
        if old:
            shutil.rmtree(path, ignore_errors=True)
        return old
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held (its process lives), or no flock here: not ours to judge
            return False
        # Only a dir this host's processes made: on a shared mount whose locks are local to
        # each client (NFS mounted `nolock`, some FUSE file systems) another host's live run
        # would look dead from here.
        if not os.read(fd, 4096).decode(errors="replace").rstrip("\n").endswith(f" on {socket.gethostname()}"):
            return False
        shutil.rmtree(path, ignore_errors=True)  # holding its lock: nobody else removes it too
        return True
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
