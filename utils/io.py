"""Atomic file writes (a run killed mid-write leaves the old file or the new one, never half of one), and the
checks that a folder can take files before anything is written there."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from .errors import DiskFull, disk_full_cause

NAME_MAX = 255  # bytes per path component on the common Linux and macOS file systems
PATH_MAX = 4000  # bytes of a whole path (Linux's PATH_MAX is 4096; room for the file names a run adds)


def bad_name(path: str | os.PathLike) -> str | None:
    """Why the file system would refuse ``path`` as a name (a component over NAME_MAX bytes, the whole over
    PATH_MAX, a NUL byte), or None; checked before anything is created, so the refusal is one line."""
    text = os.fspath(path)
    if "\0" in text:
        return "it contains a NUL byte"
    for part in Path(text).parts:
        n = len(os.fsencode(part))
        if n > NAME_MAX:
            return f"the name {part[:24]}... is {n} bytes long, file systems take at most {NAME_MAX}"
    n = len(os.fsencode(os.path.abspath(text)))
    if n > PATH_MAX:
        return f"the path is {n} bytes long, at most {PATH_MAX} leave room for the run's file names"
    return None


def folder_problem(folder: str | os.PathLike) -> str | None:
    """Why ``folder`` cannot take the files of a tool (an empty path, a name the file system refuses, a file in the
    way, no write permission), or None; what it creates to find out, it removes."""
    if not os.fspath(folder).strip():
        return "an empty path names no folder; give a folder's name"
    refused = bad_name(folder)
    if refused:
        return refused + "; pick a shorter path"
    blocked = file_in_the_way(folder)
    if blocked is not None:
        return f"{blocked} is a file, not a folder; pick another path"
    reason = unwritable(folder)
    if reason:
        return f"cannot write there ({reason}); pick another path"
    return None


def input_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot be read from (a name the file system refuses, nothing there), or None."""
    refused = bad_name(path)
    if refused:
        return refused
    if not Path(path).exists():
        return "no such file or folder"
    return None


def output_file_problem(path: str | os.PathLike) -> str | None:
    """Why a file cannot be written at ``path`` (its name, a file where its folder should be, an unwritable or
    missing folder, a folder in its place), or None; creates nothing."""
    if not os.fspath(path).strip():
        return "an empty path names no file"
    refused = bad_name(path)
    if refused:
        return refused
    path = Path(path)
    if path.is_dir():
        return f"{path} is a folder"
    blocked = file_in_the_way(path.parent)
    if blocked is not None:
        return f"{blocked} is a file, not a folder"
    if not path.parent.is_dir():
        return f"no folder {path.parent}"
    if not os.access(path.parent, os.W_OK):
        return f"cannot write in {path.parent}"
    return None


def file_in_the_way(folder: str | os.PathLike) -> Path | None:
    """The file that keeps ``folder`` from being a folder (it, or the nearest existing parent, is not a directory);
    None when the folder exists or can be created."""
    existing = next((p for p in [Path(folder), *Path(folder).parents] if p.exists()), None)
    return existing if existing is not None and not existing.is_dir() else None


def unwritable(folder: str | os.PathLike) -> str | None:
    """Why no file can be written in ``folder`` (None if one can): creates the missing folders and a
    temporary file there, then removes whatever it created, so a refused run leaves nothing behind."""
    folder = Path(folder)
    missing = missing_folders(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        return e.strerror or type(e).__name__
    finally:
        remove_if_empty(missing)
    return None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def missing_folders(folder: str | os.PathLike) -> list[Path]:
    """The folders that creating ``folder`` would create, deepest first (the order to remove them in)."""
    missing = []
    p = Path(folder)
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    return missing


def remove_if_empty(folders: list[Path]) -> None:
    """Remove each folder (deepest first) that is empty; the others, and any error, are left alone."""
    for d in folders:
        try:
            d.rmdir()
        except OSError:
            pass


def atomic_write(path: str | os.PathLike, write: Callable[[Any], None], mode: str = "wb") -> None:
    """Call ``write(file)`` on a temporary file beside ``path``, then rename it over ``path``.

    A write that fails leaves ``path`` as it was (the old file or none), removes the temporary file and the folders
    it created; a full disk or an exceeded quota, also inside torch.save (which raises a RuntimeError from the
    OSError), is a ``DiskFull`` naming ``path``."""
    path = Path(path)
    created = missing_folders(path.parent)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, mode) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual permissions
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        remove_if_empty(created)
        full = disk_full_cause(e)
        if full is not None and not isinstance(e, DiskFull):
            raise DiskFull(full.errno, full.strerror or os.strerror(full.errno), str(path)) from e
        raise


def save_curve(path: str | os.PathLike, values) -> None:
    """Save a learning curve as a float64 .npy file, atomically."""
    arr = np.asarray(values, dtype=np.float64)
    atomic_write(path, lambda f: np.save(f, arr))


def save_json(path: str | os.PathLike, obj: Any) -> None:
    """Write pretty JSON atomically."""
    atomic_write(path, lambda f: f.write(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n"), mode="w")


def save_torch(path: str | os.PathLike, obj: Any) -> None:
    """torch.save, atomically."""
    import torch

    atomic_write(path, lambda f: torch.save(obj, f))


def _sync(path: Path) -> None:
    """Flush a file a writer has closed to the disk (a full disk some file systems report only now: ENOSPC)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _as_disk_full(e: BaseException, name: Callable[[str | None], str]) -> None:
    """Raise a ``DiskFull`` naming ``name(the failed file)`` when ``e`` is, or came from, a full disk or an exceeded
    quota; return otherwise."""
    full = disk_full_cause(e)
    if full is not None:
        raise DiskFull(full.errno, full.strerror or os.strerror(full.errno), name(full.filename)) from e


@contextmanager
def written_whole(path: str | os.PathLike) -> Iterator[Path]:
    """For a writer that takes a file name (matplotlib's savefig, imageio, ffmpeg): a temporary name beside ``path``
    ending as ``path`` does (a writer that goes by the extension writes the same format), synced and renamed over
    ``path`` once the block ends. A block that fails leaves ``path`` as it was (the old file or none) and removes the
    temporary file and the folders made for it; a full disk or an exceeded quota is a ``DiskFull`` naming ``path``."""
    path = Path(path)
    created = missing_folders(path.parent)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=f".tmp{path.suffix}")
        os.close(fd)
        tmp = Path(name)
        yield tmp
        _sync(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual permissions
        os.replace(tmp, path)
        tmp = None
    except BaseException as e:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        remove_if_empty(created)
        _as_disk_full(e, lambda _: str(path))
        raise


@contextmanager
def written_together(out: str | os.PathLike) -> Iterator[Path]:
    """A set of files written as one into the folder ``out`` (a report and its figures): the block writes them into
    the temporary folder it is given (inside ``out``, on the same file system); once it ends every file is synced,
    then moved into ``out`` (replacing a file of the same name). A block that fails removes the temporary folder,
    with all it holds, and the folders made for ``out``: no file of the set is in ``out``, each file there is as it
    was. A full disk or an exceeded quota is a ``DiskFull`` naming the file in ``out`` (``out/`` when unknown)."""
    out = Path(out)
    created = missing_folders(out)
    stage = None
    try:
        out.mkdir(parents=True, exist_ok=True)
        stage = out / Path(tempfile.mkdtemp(dir=out, prefix=".writing.", suffix=".tmp")).name
        yield stage
        files = sorted(p for p in stage.rglob("*") if p.is_file())
        for p in files:
            _sync(p)
        for p in files:
            target = out / p.relative_to(stage)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(p, target)
        shutil.rmtree(stage)
    except BaseException as e:
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)
        remove_if_empty(created)

        def name(failed: str | None) -> str:
            try:
                return str(out / Path(failed).absolute().relative_to(stage.absolute()))
            except (TypeError, ValueError, AttributeError):  # no file named, one outside, no temporary folder yet
                return os.path.join(out, "")  # the folder: a trailing separator
        _as_disk_full(e, name)
        raise
