"""The Recorder sees what a count reads, and Dependencies.changed() notices when any of it changes."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

import pytest

from pytest_flopbudget._cache import digests, file_roots
from pytest_flopbudget._cache import recorder as recording
from pytest_flopbudget._cache.dependencies import Dependencies
from pytest_flopbudget._cache.digests import file_digest
from pytest_flopbudget._cache.recorder import Recorder


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
    monkeypatch.setitem(recording.INITIAL_ENVIRONMENT, "FB_TEST_WIDTH", "4")
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
    start = recording.INITIAL_ENVIRONMENT
    assert deps.env == {digests.WHOLE_ENVIRONMENT: digests.environment_digest(start)}
    some = next(iter(recording.INITIAL_ENVIRONMENT))
    assert deps.changed(environ={**recording.INITIAL_ENVIRONMENT, some: "changed"}) == "the environment changed"


def test_a_library_scanning_the_environment_records_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recording, "_called_from_library", lambda: True)
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
    assert not recording._ACTIVE


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
    monkeypatch.setattr(file_roots, "_ROOTS", [((str(site) + os.sep,), file_roots.stdlib_roots())])

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
    start = dict(recording.INITIAL_ENVIRONMENT)
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
    monkeypatch.setattr(recording, "_actor", lambda frame, metadata_is_import=True: "library")
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
    assert not any(isinstance(f, recording._ModuleLookups) for f in sys.meta_path)


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


# -- failing closed: every read is a fact, or the count is not cached ----------------------------------------------


def _import_fresh(name: str, directory: Path) -> None:
    """Import `name` from `directory` (inside whatever recorder is active), then forget it."""
    sys.path.insert(0, str(directory))
    try:
        __import__(name)
    finally:
        sys.path.remove(str(directory))
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[loaded]


def test_a_listing_made_by_project_code_while_its_module_is_imported_is_recorded(tmp_path: Path) -> None:
    layers = tmp_path / "layers"
    layers.mkdir()
    (layers / "conv.py").write_text("")
    (tmp_path / "fb_test_registry.py").write_text(
        "import os\nLAYERS = sorted(os.listdir(os.path.join(os.path.dirname(__file__), 'layers')))\n"
    )
    recorder = Recorder()
    with recorder:
        _import_fresh("fb_test_registry", tmp_path)
    deps = Dependencies.capture(recorder, modules=[])
    assert str(layers) in deps.listings  # main: dropped, because the import system was on the stack
    (layers / "attention.py").write_text("")
    assert deps.changed() == f"the files in {layers} changed"


@pytest.mark.parametrize(
    "glob_it",
    [
        lambda root: __import__("glob").glob(os.path.join(root, "*.cfg")),
        lambda root: list(Path(root).glob("*.cfg")),
        lambda root: list(Path(root).rglob("*.cfg")),
        lambda root: list(Path(root).iterdir()),
        lambda root: os.listdir(),
    ],
    ids=["glob.glob", "Path.glob", "Path.rglob", "Path.iterdir", "os.listdir()"],
)
def test_a_glob_of_the_project_root_is_recorded_though_it_is_on_sys_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, glob_it: object
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    recorder = Recorder()
    with recorder:
        glob_it(str(tmp_path))  # type: ignore[operator]
    deps = Dependencies.capture(recorder, modules=[])
    assert deps.changed() is None
    (tmp_path / "extra.cfg").write_text("")
    assert deps.changed() == f"the files in {tmp_path} changed"


def test_a_file_added_to_a_listed_directory_while_the_count_ran_makes_the_record_unstable(tmp_path: Path) -> None:
    shards = tmp_path / "shards"
    shards.mkdir()
    recorder = Recorder()
    with recorder:
        os.listdir(shards)
        (shards / "late.bin").write_bytes(b"")  # after the count listed it
    deps = Dependencies.capture(recorder, modules=[])
    assert deps.unstable == [str(shards)]  # main: the listing is taken at capture, with late.bin: a wrong hit


def test_a_namespace_package_that_gains_an_init_file_is_a_change(tmp_path: Path) -> None:
    (tmp_path / "fb_test_ns").mkdir()
    (tmp_path / "fb_test_ns" / "layers.py").write_text("WIDTH = 4\n")
    recorder = Recorder()
    with recorder:
        _import_fresh("fb_test_ns.layers", tmp_path)
    deps = Dependencies.capture(recorder, modules=[])
    assert deps.changed() is None
    (tmp_path / "fb_test_ns" / "__init__.py").write_text("WIDTH = 8\n")
    assert deps.changed() == f"{tmp_path / 'fb_test_ns' / '__init__.py'} changed"


def test_find_spec_of_a_module_that_is_there_is_a_change_when_it_goes(tmp_path: Path) -> None:
    import importlib.util

    (tmp_path / "fb_test_fastlib.py").write_text("")
    sys.path.insert(0, str(tmp_path))
    try:
        recorder = Recorder()
        with recorder:
            assert importlib.util.find_spec("fb_test_fastlib") is not None  # found, never imported
        deps = Dependencies.capture(recorder, modules=[])
    finally:
        sys.path.remove(str(tmp_path))
    assert deps.changed() is None
    (tmp_path / "fb_test_fastlib.py").unlink()  # pip uninstall
    assert deps.changed() == f"{tmp_path / 'fb_test_fastlib.py'} changed"


def _fake_site_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = tmp_path / "site-packages"
    site.mkdir()
    roots = (str(site) + os.sep, *file_roots.library_roots())
    monkeypatch.setattr(file_roots, "_ROOTS", [(roots, file_roots.stdlib_roots())])
    monkeypatch.syspath_prepend(str(site))
    return site


def test_a_missing_module_installed_into_site_packages_later_is_a_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = _fake_site_packages(tmp_path, monkeypatch)
    recorder = Recorder()
    with recorder, contextlib.suppress(ImportError):
        import fb_test_fastlib  # type: ignore[import-not-found]  # noqa: F401
    deps = Dependencies.capture(recorder, modules=[])
    assert deps.changed() is None  # main: the probes under site-packages were dropped
    (site / "fb_test_fastlib").mkdir()
    (site / "fb_test_fastlib" / "__init__.py").write_text("")
    assert deps.changed() == f"{site / 'fb_test_fastlib'} changed"


def test_an_importlib_metadata_lookup_is_a_change_when_the_distribution_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.metadata

    site = _fake_site_packages(tmp_path, monkeypatch)
    recorder = Recorder()
    with recorder, contextlib.suppress(importlib.metadata.PackageNotFoundError):
        importlib.metadata.version("fb-test-fastlib")
    deps = Dependencies.capture(recorder, modules=[])
    assert deps.changed() is None
    dist_info = site / "fb_test_fastlib-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: fb-test-fastlib\nVersion: 1.0\n")
    assert deps.changed() == "the installed distributions named 'fb-test-fastlib' changed"
    assert importlib.metadata.Distribution.discover.__func__.__name__ == "discover"  # unpatched after recording


def test_a_library_scanning_every_distribution_records_nothing_but_the_project_doing_it_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.metadata

    recorder = Recorder()
    with recorder:
        importlib.metadata.entry_points(group="fb_test_group")
    assert len(Dependencies.capture(recorder, modules=[]).distribution_queries) == 1
    monkeypatch.setattr(recording, "_actor", lambda frame, metadata_is_import=True: "library")
    recorder = Recorder()
    with recorder:
        importlib.metadata.entry_points(group="fb_test_group")
    assert Dependencies.capture(recorder, modules=[]).distribution_queries == {}


def test_a_copy_of_the_whole_environment_is_recorded_whoever_takes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recording, "_called_from_library", lambda *args, **kwargs: True)  # a library's code
    for take in (lambda: dict(os.environ), lambda: os.environ.copy()):
        recorder = Recorder()
        with recorder:
            take()
        deps = Dependencies.capture(recorder, modules=[])
        start = dict(recording.INITIAL_ENVIRONMENT)
        assert deps.changed(environ=start) is None
        assert deps.changed(environ={**start, "FB_TEST_ADDED_LATER": "1"}) == "the environment changed"


def test_a_record_holds_digests_of_variables_never_their_values(monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    token = "hf_fbTestSecretValue1234567890"
    monkeypatch.setitem(recording.INITIAL_ENVIRONMENT, "HF_TOKEN", token)
    monkeypatch.setenv("HF_TOKEN", token)
    recorder = Recorder()
    with recorder:
        os.environ.get("HF_TOKEN")
    deps = Dependencies.capture(recorder, modules=[])
    text = json.dumps(deps.to_dict())
    assert token not in text and token[3:12] not in text
    assert deps.changed(environ={"HF_TOKEN": token}) is None
    assert deps.changed(environ={"HF_TOKEN": token + "x"}) == "HF_TOKEN changed"
    assert deps.changed(environ={}) == "HF_TOKEN changed"


def _spawned_worker() -> None:
    import multiprocessing

    worker = multiprocessing.get_context("spawn").Process(target=len, args=("",))
    worker.start()
    worker.join()


@pytest.mark.parametrize(
    ("run", "reason"),
    [
        (lambda tmp: __import__("subprocess").run(["true"], check=True), "it ran a subprocess (true)"),
        (lambda tmp: os.system("true"), "it ran a shell command (os.system)"),
        (lambda tmp: os.waitpid(os.posix_spawn("/bin/true", ["true"], {}), 0), "it ran a subprocess (true)"),
        (lambda tmp: _spawned_worker(), "it started a multiprocessing worker"),
        (
            lambda tmp: __import__("sqlite3").connect(str(tmp / "widths.db")).close(),
            "it opened a database with sqlite3",
        ),
    ],
    ids=["subprocess", "os.system", "os.posix_spawn", "multiprocessing spawn", "sqlite3"],
)
def test_a_read_the_recorder_cannot_follow_makes_the_count_uncacheable(
    tmp_path: Path, run: object, reason: str
) -> None:
    recorder = Recorder()
    with recorder:
        run(tmp_path)  # type: ignore[operator]
    assert Dependencies.capture(recorder, modules=[]).uncacheable == reason


def test_a_forked_worker_makes_the_count_uncacheable() -> None:
    recorder = Recorder()
    with recorder:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os._exit(0)
    os.waitpid(pid, 0)
    assert recorder.uncacheable == "it forked a process (a multiprocessing worker, pty or os.fork)"


def test_a_project_library_loaded_with_ctypes_makes_the_count_uncacheable_and_the_c_library_does_not(
    tmp_path: Path,
) -> None:
    import ctypes
    import ctypes.util
    import shutil

    libm = ctypes.util.find_library("m")
    if libm is None:
        pytest.skip("no C math library to load")
    recorder = Recorder()
    with recorder:
        ctypes.CDLL(libm)  # the platform's, by name
    assert recorder.uncacheable is None
    system_copy = next((p for p in ("/usr/lib/x86_64-linux-gnu/" + libm, "/lib/x86_64-linux-gnu/" + libm)
                        if os.path.exists(p)), None)  # fmt: skip
    if system_copy is None:
        pytest.skip("the math library is not where this test looks for it")
    shutil.copy(system_copy, tmp_path / "libwidth.so")
    with recorder:
        ctypes.CDLL(str(tmp_path / "libwidth.so"))  # the project's own
    assert recorder.uncacheable == "it loaded a native library with ctypes (libwidth.so)"


def test_harmless_uses_of_those_events_stay_cacheable() -> None:
    import sqlite3

    recorder = Recorder()
    with recorder:
        sqlite3.connect(":memory:").close()
    assert recorder.uncacheable is None


def test_a_fifo_is_never_opened_and_reading_one_makes_the_count_uncacheable(tmp_path: Path) -> None:
    fifo = tmp_path / "weights.fifo"
    os.mkfifo(fifo)
    assert file_digest(str(fifo)) == "not a regular file: a FIFO"  # main: blocks for ever, waiting for a writer
    recorder = Recorder()
    with recorder:
        os.path.exists(fifo)
    deps = Dependencies.capture(recorder, modules=[])
    assert deps.files[str(fifo)] == "not a regular file: a FIFO" and deps.uncacheable is None
    assert deps.changed() is None
    fifo.unlink()
    fifo.write_text("now a file")
    assert deps.changed() == f"{fifo} changed"
    fifo.unlink()
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # so that the count's read does not block
    try:
        os.write(writer, b"4")
        recorder = Recorder()
        with recorder:
            fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
            os.read(fd, 1)
            os.close(fd)
        assert Dependencies.capture(recorder, modules=[]).uncacheable == f"it read a FIFO {fifo}"
    finally:
        os.close(writer)


def test_the_platform_asking_uname_is_not_a_reason_but_the_project_running_it_is() -> None:
    import platform
    import subprocess

    recorder = Recorder()
    with recorder:
        platform._Processor.from_subprocess()  # type: ignore[attr-defined]  # what platform.processor() runs
    assert recorder.uncacheable is None
    with recorder:
        subprocess.run(["uname", "-p"], capture_output=True, check=False)
    assert recorder.uncacheable == "it ran a subprocess (uname)"


def test_a_pty_makes_the_count_uncacheable() -> None:
    import pty

    recorder = Recorder()
    with recorder:
        pid, fd = pty.fork()
        if pid == 0:  # pragma: no cover - the child
            os._exit(0)
    os.waitpid(pid, 0)
    os.close(fd)
    assert recorder.uncacheable == "it forked a process (a multiprocessing worker, pty or os.fork)"


def test_the_links_in_a_listed_directory_are_described_not_probed(tmp_path: Path) -> None:
    (tmp_path / "blob").write_bytes(b"weights")
    (tmp_path / "snapshot").mkdir()
    (tmp_path / "snapshot" / "model.safetensors").symlink_to(tmp_path / "blob")  # a Hugging Face snapshot
    recorder = Recorder()
    with recorder:
        os.listdir(tmp_path / "snapshot")
    # the listing's fact holds the link's target; hashing every weights file behind it would cost every check
    assert str(tmp_path / "snapshot" / "model.safetensors") not in recorder.probes
    assert str(tmp_path / "snapshot") in recorder.listings
