"""Files opened by compiled code: the paths given to the known native readers, and files still held at the end."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_flopbudget._cache import native_readers
from pytest_flopbudget._cache.dependencies import Dependencies
from pytest_flopbudget._cache.digests import file_digest
from pytest_flopbudget._cache.recorder import Recorder


def test_an_hdf5_file_h5py_reads_and_closes_is_a_fact(tmp_path: Path) -> None:
    h5py = pytest.importorskip("h5py")
    import numpy

    weights = tmp_path / "weights.h5"
    with h5py.File(weights, "w") as file:
        file["head"] = numpy.zeros((3, 8))
    recorder = Recorder()
    with recorder, h5py.File(weights, "r") as file:  # HDF5 opens it itself: no `open` audit event
        assert file["head"].shape == (3, 8)
    deps = Dependencies.capture(recorder, modules=[])
    assert deps.files[str(weights)] == file_digest(str(weights))
    with h5py.File(weights, "w") as file:
        file["head"] = numpy.zeros((9, 8))
    assert deps.changed() == f"{weights} changed"
    assert not native_readers._WRAPPED  # unwrapped once recording ends
    assert h5py._hl.files.make_fid.__module__ != native_readers.__name__


def test_a_file_opened_by_descriptor_and_still_open_at_the_end_is_noted(tmp_path: Path) -> None:
    data = tmp_path / "table.bin"
    data.write_bytes(b"1234")
    recorder = Recorder()
    with recorder, recorder.reading_itself():  # as if compiled code opened it: the open audit event is not seen
        fd = os.open(data, os.O_RDONLY)
    try:
        assert str(data) in recorder.files
    finally:
        os.close(fd)


def test_a_file_held_open_for_writing_is_not_an_input(tmp_path: Path) -> None:
    recorder = Recorder()
    with recorder, recorder.reading_itself():
        fd = os.open(tmp_path / "run.log", os.O_WRONLY | os.O_CREAT)
    try:
        assert str(tmp_path / "run.log") not in recorder.files
    finally:
        os.close(fd)


def test_held_files_lists_open_and_mapped_files() -> None:
    held = native_readers.held_files()
    assert any(path.endswith(".so") or ".so." in path for path in held)  # the interpreter's shared libraries


def test_a_reader_given_its_path_by_keyword_still_reads_and_is_noted(tmp_path: Path) -> None:
    import numpy

    data = tmp_path / "head.bin"
    numpy.arange(3, dtype=numpy.float32).tofile(data)
    recorder = Recorder()
    with recorder:  # main: the wrapper took the path positionally only: TypeError, a model that failed to count
        values = numpy.fromfile(file=data, dtype=numpy.float32)
    assert values.tolist() == [0.0, 1.0, 2.0]
    assert str(data) in recorder.files
