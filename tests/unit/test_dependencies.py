"""The Recorder sees what a count reads, and Dependencies.changed() notices when any of it changes."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

import pytest

from pytest_flopbudget import dependencies
from pytest_flopbudget.dependencies import Dependencies, Recorder, file_digest


def test_reads_are_noted_and_writes_of_new_files_are_not(tmp_path: Path) -> None:
    data = tmp_path / "config.json"
    data.write_text("{}")
    recorder = Recorder()
    with recorder:
        data.read_text()
        (tmp_path / "out.log").write_text("a log the model writes")
        os.listdir(tmp_path)
        os.path.exists(tmp_path / "override.json")
    assert str(data) in recorder.files
    assert str(tmp_path / "out.log") not in recorder.files
    assert str(tmp_path) in recorder.listings
    assert str(tmp_path / "override.json") in recorder.probes


def test_environment_reads_by_name_keep_the_value_the_process_started_with(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(dependencies._INITIAL_ENVIRONMENT, "FB_TEST_WIDTH", "4")
    monkeypatch.setenv("FB_TEST_WIDTH", "4")
    recorder = Recorder()
    with recorder:
        assert os.environ.get("FB_TEST_WIDTH") == "4"
        assert os.getenv("FB_TEST_UNSET") is None
        assert "FB_TEST_PROBE" not in os.environ
        os.environ["FB_TEST_WIDTH"] = "9"  # the process changes it: the next run starts with 4 again
    deps = Dependencies.capture(recorder, modules=[])
    four = "sha256:4b227777d4dd1fc61c6f884f48641d02b4d121d3fd328cb08b5531fcacdabf8a"  # `printf 4 | sha256sum`
    assert deps.env == {"FB_TEST_PROBE": None, "FB_TEST_UNSET": None, "FB_TEST_WIDTH": four}
    assert deps.changed(environ={"FB_TEST_WIDTH": "4"}) is None
    assert deps.changed(environ={"FB_TEST_WIDTH": "5"}) == "FB_TEST_WIDTH changed"
    assert deps.changed(environ={"FB_TEST_WIDTH": "4", "FB_TEST_UNSET": "1"}) == "FB_TEST_UNSET changed"


def test_reading_the_whole_environment_from_project_code_records_every_value() -> None:
    recorder = Recorder()
    with recorder:
        dict(os.environ.items())
    assert recorder.whole_environment
    deps = Dependencies.capture(recorder, modules=[])
    start = dependencies._INITIAL_ENVIRONMENT
    assert deps.env == {dependencies.WHOLE_ENVIRONMENT: dependencies.environment_digest(start)}
    some = next(iter(dependencies._INITIAL_ENVIRONMENT))
    assert deps.changed(environ={**dependencies._INITIAL_ENVIRONMENT, some: "changed"}) == "the environment changed"


def test_a_library_scanning_the_environment_records_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dependencies, "_called_from_library", lambda: True)
    recorder = Recorder()
    with recorder:
        {k: v for k, v in os.environ.items() if k.startswith("TQDM_")}
    assert not recorder.whole_environment
    assert Dependencies.capture(recorder, modules=[]).env == {}


def test_the_patches_are_undone_even_when_the_count_raises() -> None:
    environ_class, stat = os.environ.__class__, os.stat
    with pytest.raises(RuntimeError), Recorder():
        raise RuntimeError("the model failed")
    assert os.environ.__class__ is environ_class
    assert os.stat is stat
    assert not dependencies._ACTIVE


def test_project_files_are_hashed_and_any_edit_or_removal_is_a_change(tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text("WIDTH = 4\n")
    listed = tmp_path / "plugins"
    listed.mkdir()
    recorder = Recorder()
    with recorder:
        model.read_text()
        os.listdir(listed)
        os.path.exists(tmp_path / "absent.json")
    deps = Dependencies.capture(recorder, modules=[])
    assert deps.files[str(model)] == file_digest(str(model))
    assert deps.files[str(tmp_path / "absent.json")] == ""
    assert deps.changed() is None

    model.write_text("WIDTH = 5\n")  # same size, new content
    assert deps.changed() == f"{model} changed"
    model.write_text("WIDTH = 4\n")
    assert deps.changed() is None
    (tmp_path / "absent.json").write_text("{}")
    assert deps.changed() == f"{tmp_path / 'absent.json'} changed"
    (tmp_path / "absent.json").unlink()
    (listed / "new_plugin.py").write_text("")
    assert deps.changed() == f"the files in {listed} changed"
    (listed / "new_plugin.py").unlink()
    model.unlink()
    assert deps.changed() == f"{model} changed"


def test_modules_are_files_too_and_the_standard_library_and_kernel_files_are_not(tmp_path: Path) -> None:
    helper = tmp_path / "fb_test_helper_module.py"
    helper.write_text("X = 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import fb_test_helper_module  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("fb_test_helper_module", None)
    recorder = Recorder()
    with recorder, open("/proc/self/maps") as maps:
        maps.read()
    deps = Dependencies.capture(recorder, modules=[fb_test_helper_module, os])
    assert list(deps.files) == [str(helper)]


def test_library_files_are_checked_by_size_and_mtime_and_distributions_by_their_dist_info(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site-packages"
    (site / "tinylib").mkdir(parents=True)
    module_file = site / "tinylib" / "__init__.py"
    module_file.write_text("WIDTH = 3\n")
    dist_info = site / "tinylib-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "top_level.txt").write_text("tinylib\n")
    monkeypatch.setattr(dependencies, "_ROOTS", [((str(site) + os.sep,), dependencies.stdlib_roots())])

    class Module:
        __file__ = str(module_file)

    deps = Dependencies.capture(Recorder(), modules=[Module])
    assert list(deps.libraries) == [str(module_file)]
    assert deps.distributions == [str(dist_info)]
    assert deps.changed() is None
    dist_info.rename(site / "tinylib-2.0.dist-info")  # pip install --upgrade
    assert deps.changed() == "tinylib-1.0.dist-info is no longer installed"
    (site / "tinylib-2.0.dist-info").rename(dist_info)
    module_file.write_text("WIDTH = 30\n")
    os.utime(module_file, ns=(1, 1))
    assert deps.changed() == f"{module_file} changed"


def test_a_record_of_another_shape_is_refused() -> None:
    deps = Dependencies(files={"/a": ""}, env={"X": None})
    assert Dependencies.from_dict(deps.to_dict()) == deps
    for broken in ({}, {**deps.to_dict(), "files": []}, {**deps.to_dict(), "libraries": {"/x": [1]}}):
        with pytest.raises((KeyError, TypeError, IndexError, ValueError)):
            Dependencies.from_dict(broken)


# -- what a review found: each was a stale count served, or a whole run lost ---------------------------------------


def test_a_variable_added_after_the_project_read_the_whole_environment_is_a_change() -> None:
    recorder = Recorder()
    with recorder:
        os.environ.copy().get("FB_TEST_NOT_SET_YET", "4")
    deps = Dependencies.capture(recorder, modules=[])
    start = dict(dependencies._INITIAL_ENVIRONMENT)
    assert deps.changed(environ=start) is None
    assert deps.changed(environ={**start, "FB_TEST_NOT_SET_YET": "16"}) == "the environment changed"


def test_a_probed_directory_that_disappears_is_a_change(tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    recorder = Recorder()
    with recorder:
        assert os.path.isdir(plugins)
    deps = Dependencies.capture(recorder, modules=[])
    assert deps.changed() is None
    plugins.rmdir()
    assert deps.changed() == f"{plugins} changed"


def test_access_and_bytes_environment_reads_are_recorded(tmp_path: Path) -> None:
    recorder = Recorder()
    with recorder:
        os.access(tmp_path / "flag", os.F_OK)
        os.environb.get(b"FB_TEST_BYTES")
        os.get_exec_path()  # reads environ[b"PATH"]: a bytes key must not break the record
    deps = Dependencies.capture(recorder, modules=[])
    assert deps.files[str(tmp_path / "flag")] == ""
    assert "FB_TEST_BYTES" in deps.env and "PATH" in deps.env
    (tmp_path / "flag").write_text("")
    assert deps.changed() == f"{tmp_path / 'flag'} changed"


def test_listings_are_recorded_whoever_lists_except_a_librarys_sys_path_scans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    classes = tmp_path / "classes"
    classes.mkdir()
    root = sys.path[0] or "."
    recorder = Recorder()
    with recorder:
        os.listdir(root)  # the project's own glob of a sys.path directory (its root): a dependency
    assert list(Dependencies.capture(recorder, modules=[]).listings) == [os.path.abspath(root)]
    monkeypatch.setattr(dependencies, "_actor", lambda frame, metadata_is_import=True: "library")
    recorder = Recorder()
    with recorder:
        os.listdir(classes)  # fsspec listing a data directory: a dependency
        os.listdir(root)  # what entry-point scans do: not a dependency
    assert list(Dependencies.capture(recorder, modules=[]).listings) == [str(classes)]


def test_a_module_that_failed_to_import_is_a_change_when_it_appears(tmp_path: Path) -> None:
    sys.path.insert(0, str(tmp_path))
    try:
        recorder = Recorder()
        with recorder, contextlib.suppress(ImportError):
            import fb_test_optional_accelerator  # type: ignore[import-not-found]  # noqa: F401
        deps = Dependencies.capture(recorder, modules=[])
        assert deps.changed() is None
        (tmp_path / "fb_test_optional_accelerator.py").write_text("FAST = True\n")
        assert deps.changed() == f"{tmp_path / 'fb_test_optional_accelerator.py'} changed"
    finally:
        sys.path.remove(str(tmp_path))
    assert not any(isinstance(f, dependencies._ModuleLookups) for f in sys.meta_path)


def test_a_file_changed_while_the_count_ran_makes_the_record_unstable(tmp_path: Path) -> None:
    width = tmp_path / "width.txt"
    width.write_text("4")
    time.sleep(0.2)  # older than the count, by more than the coarse file clock's margin
    recorder = Recorder()
    with recorder:
        width.read_text()
    assert Dependencies.capture(recorder, modules=[]).unstable == []
    with recorder:
        width.read_text()
        os.path.isdir(tmp_path)
        (tmp_path / "other.txt").write_text("a directory that changes (as /tmp does) is not a reason")
        width.write_text("16")  # edited by the user mid-count
    assert Dependencies.capture(recorder, modules=[]).unstable == [str(width)]
