"""The count cache fails closed, end to end: `flopbudget check` in a real project, where each way a count can read
something is either a recorded fact (changing it recounts) or makes the model uncacheable (it is counted every
time). Each test here was a stale verdict before: the second check answered from the cache with the old count.

As in test_cached_checks.py, the model's factory appends to `counted.log` when it runs (a write-only open, not an
input; next to the project, not in it, where it would change the listings some models make), so "was it
recounted?" is read from what really happened; and every recount must print what `--no-cache` prints.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from e2e_helpers import clean_env

pytestmark = pytest.mark.slow

PYPROJECT = """\
[tool.flopbudget.models.m]
target = "model:build"
inputs = [[1, 8]]
flops = "100k"
"""

HEADER = """\
import json
import os
from pathlib import Path

from torch import nn

HERE = Path(__file__).parent


def counted():
    with open(HERE.parent / "counted.log", "a") as log:
        log.write("m\\n")
"""


def make_project(tmp_path: Path, body: str, **files: str) -> Path:
    """A project whose `model:build` is HEADER + `body`; `files` are more files (path relative to root: text)."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "model.py").write_text(HEADER + textwrap.dedent(body))
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def check(project: Path, *args: str, timeout: float = 300, **env: str) -> tuple[bool, str]:
    """Run `flopbudget check`; return whether the model was counted, and its FLOPs as printed."""
    log = project.parent / "counted.log"
    log.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "pytest_flopbudget", "check", *args], cwd=project, capture_output=True, text=True,
        env=clean_env(FLOPBUDGET_NO_CACHE="", **env), check=False, timeout=timeout,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stdout + done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("m "))
    return log.exists(), line.split()[2]


def assert_recounts_after(project: Path, change: Callable[[], None], warm_up: int = 1, **env: str) -> None:
    """The model is cached (after `warm_up` checks, a check counts nothing), and after `change` it is counted
    again, with the count a check without the cache makes."""
    for _ in range(warm_up):
        check(project, **env)
    counted, before = check(project, **env)
    assert not counted, "the model should have been cached before the change"
    change()
    counted, after = check(project, **env)
    _, fresh = check(project, "--no-cache", **env)
    assert (counted, after) == (True, fresh), f"served {after} from the cache; a fresh count says {fresh}"
    assert after != before, "the change was meant to change the count"


def assert_never_cached(project: Path, change: Callable[[], None], **env: str) -> None:
    """The model is counted on every check, and no record of it is kept; after `change` the count is fresh."""
    assert check(project, **env)[0]
    counted, before = check(project, **env)
    assert counted, "a count the recorder cannot follow was served from the cache"
    assert not list((project / ".flopbudget_cache").rglob("*.json"))
    change()
    counted, after = check(project, **env)
    assert (counted, after) == (True, check(project, "--no-cache", **env)[1])
    assert after != before


# -- reads that were recorded and then dropped ---------------------------------------------------------------------


def test_a_registry_listed_when_its_module_is_imported(tmp_path: Path) -> None:
    project = make_project(
        tmp_path,
        """
        LAYERS = sorted(os.listdir(HERE / "layers"))  # a registry built at import time


        def build():
            counted()
            return nn.Linear(8, 4 * len(LAYERS))
        """,
        **{"layers/conv.py": ""},
    )
    assert_recounts_after(project, lambda: (project / "layers" / "attention.py").write_text(""))


@pytest.mark.parametrize(
    "expression",
    ["len(glob.glob('*.cfg'))", "len(list(Path('.').glob('*.cfg')))", "sum(1 for _ in HERE.iterdir())"],
    ids=["glob.glob", "Path.glob", "Path.iterdir"],
)
def test_a_glob_of_the_project_root(tmp_path: Path, expression: str) -> None:
    project = make_project(
        tmp_path,
        f"""
        import glob


        def build():
            counted()
            return nn.Linear(8, 1 + {expression})
        """,
        **{"base.cfg": ""},
    )
    # the first check creates .flopbudget_cache in the listed root: the second counts again, and is cached
    assert_recounts_after(project, lambda: (project / "extra.cfg").write_text(""), warm_up=2)


OPTIONAL = {
    "import": """
        try:
            import fastlib
            WIDTH = fastlib.WIDTH
        except ImportError:
            WIDTH = 2
        """,
    "importlib.metadata": """
        import importlib.metadata
        try:
            WIDTH = 2 + int(importlib.metadata.version("fastlib").split(".")[0])
        except importlib.metadata.PackageNotFoundError:
            WIDTH = 2
        """,
    "importlib.util.find_spec": """
        import importlib.util
        WIDTH = 7 if importlib.util.find_spec("fastlib") else 2
        """,
}


def _user_site(userbase: Path) -> Path:
    """The user site-packages directory for PYTHONUSERBASE=userbase (a site-packages directory to this tool),
    created now, so that the installation changes no cache key, only what is in it."""
    site_dir = subprocess.run(
        [sys.executable, "-c", "import site; print(site.getusersitepackages())"],
        env=clean_env(PYTHONUSERBASE=str(userbase)), capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    Path(site_dir).mkdir(parents=True)
    return Path(site_dir)


def _site_env(userbase: Path, site_dir: Path) -> dict[str, str]:
    """The user site is put on sys.path through PYTHONPATH (a virtual environment leaves it out), in front of
    whatever PYTHONPATH this run has (the checkout under test)."""
    outer = os.environ.get("PYTHONPATH")
    return {
        "PYTHONUSERBASE": str(userbase),
        "PYTHONPATH": os.pathsep.join([str(site_dir), *([outer] if outer else [])]),
    }


def _pip_install(source: Path, name: str, code: str, target: Path) -> None:
    """A real `pip install` of a one-module package built from `code`, without the network."""
    (source / name).mkdir(parents=True)
    (source / name / "__init__.py").write_text(code)
    (source / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{name}"\nversion = "5.0"\n'
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(source)],
        check=True, capture_output=True, env=clean_env(),
    )  # fmt: skip


@pytest.mark.parametrize("lookup", list(OPTIONAL))
def test_an_optional_package_that_is_then_pip_installed(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, lookup: str
) -> None:
    userbase = tmp_path_factory.mktemp("userbase")
    site_dir = _user_site(userbase)
    project = make_project(
        tmp_path,
        OPTIONAL[lookup]
        + """

        def build():
            counted()
            return nn.Linear(8, WIDTH)
        """,
    )
    install = lambda: _pip_install(tmp_path_factory.mktemp("src"), "fastlib", "WIDTH = 7\n", site_dir)  # noqa: E731
    assert_recounts_after(project, install, **_site_env(userbase, site_dir))


def test_a_namespace_package_that_gains_an_init_file(tmp_path: Path) -> None:
    project = make_project(
        tmp_path,
        """
        import blocks
        import blocks.linear


        def build():
            counted()
            return blocks.linear.make(getattr(blocks, "WIDTH", 2))
        """,
        **{"blocks/linear.py": "from torch import nn\n\ndef make(width):\n    return nn.Linear(8, width)\n"},
    )
    assert_recounts_after(project, lambda: (project / "blocks" / "__init__.py").write_text("WIDTH = 6\n"))


def test_a_file_added_to_a_listed_directory_while_the_model_is_counted(tmp_path: Path) -> None:
    """Here the model adds it (as a data download or another process would, between the listing and the end of
    the count): the record could describe either listing, so none is kept, and the next check counts again."""
    project = make_project(
        tmp_path,
        """
        def build():
            counted()
            shards = os.listdir(HERE / "shards")
            (HERE / "shards" / "late.bin").touch()
            return nn.Linear(8, 3 * len(shards))
        """,
        **{"shards/first.bin": ""},
    )
    assert check(project)[0]
    counted, flops = check(project)
    assert counted, "the listing changed during the first count: its record must not have been kept"
    assert flops == check(project, "--no-cache")[1]
    assert not check(project)[0]  # a stable count is cached as usual


# -- reads that cannot be seen: the model is never cached ----------------------------------------------------------

UNFOLLOWABLE = {
    "generator script": """
        import subprocess, sys
        def width():
            return int(subprocess.run([sys.executable, "gen.py"], capture_output=True, text=True).stdout)
        """,
    "os.system": """
        def width():
            return os.waitstatus_to_exitcode(os.system("exit $(cat width.txt)"))
        """,
    "os.posix_spawn": """
        def width():
            pid = os.posix_spawn("/bin/sh", ["sh", "-c", "exit $(cat width.txt)"], os.environ)
            return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        """,
    "multiprocessing fork": """
        import multiprocessing
        def read():
            return int(Path("width.txt").read_text())
        def width():
            with multiprocessing.get_context("fork").Pool(1) as pool:
                return pool.apply(read)
        """,
    "multiprocessing spawn": """
        import multiprocessing
        def read():
            return int(Path("width.txt").read_text())
        def width():
            with multiprocessing.get_context("spawn").Pool(1) as pool:
                return pool.apply(read)
        """,
    "sqlite3": """
        import sqlite3
        def width():
            with sqlite3.connect(HERE / "widths.db") as db:
                return db.execute("select width from widths").fetchone()[0]
        """,
    "ctypes": """
        import ctypes
        def width():
            return ctypes.CDLL(str(HERE / "libwidth.so")).width()
        """,
    "torch.ops.load_library": """
        import ctypes, torch
        def width():
            torch.ops.load_library(str(HERE / "libwidth.so"))
            return ctypes.CDLL(str(HERE / "libwidth.so")).width()
        """,
}


def _write_width(project: Path, mechanism: str, width: int) -> None:
    """Where the width lives for `mechanism`: a file only a child process reads, a database, a native library."""
    (project / "width.txt").write_text(str(width))
    if mechanism == "sqlite3":
        import sqlite3

        (project / "widths.db").unlink(missing_ok=True)
        with sqlite3.connect(project / "widths.db") as db:
            db.execute("create table widths (width integer)")
            db.execute("insert into widths values (?)", (width,))
        db.close()
    elif mechanism in ("ctypes", "torch.ops.load_library"):
        (project / "width.c").write_text(f"int width(void) {{ return {width}; }}\n")
        subprocess.run(
            ["gcc", "-shared", "-fPIC", "-o", str(project / "libwidth.so"), str(project / "width.c")], check=True
        )


@pytest.mark.parametrize("mechanism", list(UNFOLLOWABLE))
def test_a_read_through_a_child_process_database_or_native_library(tmp_path: Path, mechanism: str) -> None:
    if mechanism in ("ctypes", "torch.ops.load_library") and shutil.which("gcc") is None:
        pytest.skip("needs gcc to build the project's native library")
    project = make_project(
        tmp_path,
        UNFOLLOWABLE[mechanism]
        + """

        def build():
            counted()
            return nn.Linear(8, width())
        """,
        **{"gen.py": "from pathlib import Path\nprint(int(Path('width.txt').read_text()))\n"},
    )
    _write_width(project, mechanism, 3)
    assert_never_cached(project, lambda: _write_width(project, mechanism, 9))


def test_a_library_that_copies_the_whole_environment(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory):
    """`dict(os.environ)` in an installed package: what it later reads from its copy cannot be seen, so the
    copy is a read of every variable, including one set only later."""
    userbase = tmp_path_factory.mktemp("userbase")
    site_dir = _user_site(userbase)
    _pip_install(tmp_path_factory.mktemp("src"), "envlib", "import os\nENV = dict(os.environ)\n", site_dir)
    project = make_project(
        tmp_path,
        """
        import envlib


        def build():
            counted()
            return nn.Linear(8, int(envlib.ENV.get("FB_E2E_WIDTH", "2")))
        """,
    )
    env = _site_env(userbase, site_dir)
    assert check(project, **env)[0]
    assert not check(project, **env)[0]
    counted, flops = check(project, FB_E2E_WIDTH="5", **env)
    assert (counted, flops) == (True, check(project, "--no-cache", FB_E2E_WIDTH="5", **env)[1])


# -- what a record holds and opens ---------------------------------------------------------------------------------


def test_a_record_never_holds_the_value_of_a_variable_the_model_read(tmp_path: Path) -> None:
    token = "hf_e2eSecretTokenValue0123456789"
    project = make_project(
        tmp_path,
        """
        def build():
            counted()
            return nn.Linear(8, 4 if os.environ.get("HF_TOKEN") else 2)
        """,
    )
    assert check(project, HF_TOKEN=token)[0]
    records = list((project / ".flopbudget_cache").rglob("*.json"))
    assert records
    read: set[str] = set()  # the variables read, kept by digest: in the shared fact set (every env read is there)
    for record in records:
        assert token.encode() not in record.read_bytes()
        read |= set(json.loads(record.read_text())["dependencies"]["env"])
    assert "HF_TOKEN" in read
    assert not check(project, HF_TOKEN=token)[0]
    assert check(project, HF_TOKEN=token + "-rotated")[0]  # a digest still notices a change


def test_a_dependency_that_becomes_a_fifo_is_a_change_and_never_hangs_the_check(tmp_path: Path) -> None:
    project = make_project(
        tmp_path,
        """
        def build():
            counted()
            override = HERE / "override.json"
            width = json.loads(override.read_text())["width"] if override.is_file() else 2
            return nn.Linear(8, width)
        """,
        **{"override.json": '{"width": 5}'},
    )
    assert check(project)[0]
    assert not check(project)[0]
    (project / "override.json").unlink()
    os.mkfifo(project / "override.json")  # opening it to hash it would wait for a writer for ever
    counted, flops = check(project, timeout=120)
    assert (counted, flops) == (True, check(project, "--no-cache", timeout=120)[1])
    assert not check(project, timeout=120)[0]  # a FIFO that is only probed is a fact like any other


NATIVE = {
    "h5py": (
        """
        import h5py
        def width():
            with h5py.File(HERE / "weights.h5", "r") as weights:  # HDF5 opens it: no `open` audit event
                return weights["head"].shape[0]
        """,
        "import h5py, numpy\nwith h5py.File('weights.h5', 'w') as f:\n    f['head'] = numpy.zeros((WIDTH, 8))\n",
    ),
    "safetensors": (
        """
        from safetensors.torch import load_file
        def width():
            return load_file(HERE / "head.safetensors")["head"].shape[0]
        """,
        "import torch\nfrom safetensors.torch import save_file\nsave_file({'head': torch.zeros(WIDTH, 8)}, "
        "'head.safetensors')\n",
    ),
    "torch": (  # main: not a listed reader, so the file torch reads and closes itself was no fact
        """
        import torch
        def width():
            return int(torch.from_file(filename=str(HERE / "head.bin"), size=1, dtype=torch.float32).item())
        """,
        "import numpy\nnumpy.array([WIDTH], dtype=numpy.float32).tofile('head.bin')\n",
    ),
}


@pytest.mark.parametrize("reader", list(NATIVE))
def test_a_weights_file_a_native_library_reads(tmp_path: Path, reader: str) -> None:
    pytest.importorskip(reader)
    body, writer = NATIVE[reader]
    project = make_project(
        tmp_path,
        body
        + """

        def build():
            counted()
            return nn.Linear(8, width())
        """,
    )

    def write(width: int) -> None:
        subprocess.run([sys.executable, "-c", writer.replace("WIDTH", str(width))], cwd=project, check=True)

    write(3)
    assert_recounts_after(project, lambda: write(9))


def test_a_data_file_staged_in_shared_memory(tmp_path: Path) -> None:
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        pytest.skip("no writable /dev/shm")
    staged = shm / f"flopbudget-test-{os.getpid()}-{tmp_path.name}.json"
    staged.write_text('{"width": 3}')
    try:
        project = make_project(
            tmp_path,
            f"""
            def build():
                counted()
                return nn.Linear(8, json.loads(Path({str(staged)!r}).read_text())["width"])
            """,
        )  # main: /dev/ was skipped as kernel files, so the staged config was no fact and the old count stayed
        assert_recounts_after(project, lambda: staged.write_text('{"width": 6}'))
    finally:
        staged.unlink(missing_ok=True)


@pytest.mark.parametrize("read", ["os.path.realpath(LATEST)", "os.readlink(LATEST)"])
def test_a_link_retargeted_to_a_directory_of_the_same_kind(tmp_path: Path, read: str) -> None:
    project = make_project(
        tmp_path,
        f"""
        LATEST = HERE / "checkpoints" / "latest"


        def build():
            counted()
            step = int(os.path.basename({read}).removeprefix("step"))  # where the link points, not what it holds
            return nn.Linear(8, step)
        """,
        **{"checkpoints/step4/weights": "same", "checkpoints/step16/weights": "same"},
    )
    latest = project / "checkpoints" / "latest"
    latest.symlink_to("step4")

    def retarget() -> None:
        latest.unlink()
        latest.symlink_to("step16")

    # main: the fact was the target's ("a directory"), the same for both: the old step's count stayed
    assert_recounts_after(project, retarget)


@pytest.mark.parametrize(
    ("expression", "change"),
    [
        ("sum(entry.stat().st_size for entry in entries)", lambda data: (data / "a.bin").write_text("xxxxxxxx")),
        (
            "sum(1 + entry.is_dir() for entry in entries)",
            lambda data: ((data / "a.bin").unlink(), (data / "a.bin").mkdir()),
        ),
    ],
    ids=["DirEntry.stat", "DirEntry.is_dir"],
)
def test_what_a_scandir_entry_tells_without_opening_the_file(
    tmp_path: Path, expression: str, change: Callable[[Path], object]
) -> None:
    project = make_project(
        tmp_path,
        f"""
        def build():
            counted()
            with os.scandir(HERE / "data") as entries:
                width = {expression}  # no open, no os.stat: only the listing's own entries
            return nn.Linear(8, width)
        """,
        **{"data/a.bin": "xxxx"},
    )
    # main: a listing's fact was its names alone, which did not change
    assert_recounts_after(project, lambda: change(project / "data"))


def test_a_dotdot_path_through_a_linked_directory(tmp_path: Path) -> None:
    checkout = tmp_path / "other-checkout"  # the models come from another checkout, through a link
    (checkout / "models").mkdir(parents=True)
    (checkout / "configs").mkdir()
    (checkout / "configs" / "w.json").write_text('{"width": 3}')
    (checkout / "models" / "__init__.py").write_text("")
    (checkout / "models" / "net.py").write_text(
        HEADER
        + textwrap.dedent(
            """
            def counted():  # next to the project, as HEADER's is for a module at its root
                with open(HERE.parent.parent / "counted.log", "a") as log:
                    log.write("m\\n")


            def build():
                counted()
                # the kernel resolves models/.. through the link: other-checkout/configs/w.json is read
                return nn.Linear(8, json.loads(open(os.path.join(HERE, "..", "configs", "w.json")).read())["width"])
            """
        )
    )
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(PYPROJECT.replace("model:build", "models.net:build"))
    (project / "models").symlink_to(checkout / "models")
    (project / "configs").mkdir()
    (project / "configs" / "w.json").write_text('{"width": 3}')  # what the text `models/../configs` names
    # main: the path was normalised as text, so project/configs/w.json was the fact and the change went unseen
    assert_recounts_after(project, lambda: (checkout / "configs" / "w.json").write_text('{"width": 6}'))


def test_the_interpreter_run_with_optimisations(tmp_path: Path) -> None:
    project = make_project(
        tmp_path,
        """
        def build():
            counted()
            return nn.Linear(8, 3 if __debug__ else 6)  # python -O, or PYTHONOPTIMIZE=1 in the hook's environment
        """,
    )
    check(project)
    assert not check(project)[0]
    # main: the optimisation level was no part of the key and no fact: the -O count was the cached one
    counted, flops = check(project, PYTHONOPTIMIZE="1")
    assert (counted, flops) == (True, check(project, "--no-cache", PYTHONOPTIMIZE="1")[1])
    assert flops != check(project, "--no-cache")[1]
