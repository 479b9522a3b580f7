"""The count cache, end to end: `flopbudget check` run twice in a real project, changing one thing in between.

Each model's factory appends its name to `counted.log` when it runs (a write-only open, which is not an input), so
"was it recounted?" is read from what really happened, not from what the tool says about itself. Every way a
count's inputs can change must recount exactly the models that read it: the model's own file, a helper module it
imports, a data file it reads, a file whose absence it probed, an environment variable, an installed package's
version; and nothing else may (a ceiling edit, a test file, another model's file).

After every test, `flopbudget check --cache=verify` recounts the project's models and must find no record that
would have answered differently from a fresh count (`verify_after_each_test`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from e2e_helpers import clean_env, flopbudget, git, init_repo

from pytest_flopbudget._cache.store import FORMAT as STORE_FORMAT

pytestmark = pytest.mark.slow

PYPROJECT = """\
[tool.flopbudget.models.small]
target = "pkg.model:build"
inputs = [[1, 8]]
flops = "10k"

[tool.flopbudget.models.other]
target = "other:build"
inputs = [[1, 8]]
flops = "10k"
"""

MODEL = """\
import contextlib
import json
import os
from pathlib import Path

from torch import nn

from pkg.helpers import block

HERE = Path(__file__).parent


def build():
    with open(HERE.parent / "counted.log", "a") as log:
        log.write("small\\n")
    width = json.loads((HERE / "config.json").read_text())["width"]
    if os.path.exists(HERE / "override.json"):
        width = json.loads((HERE / "override.json").read_text())["width"]
    width += int(os.environ.get("SMALL_EXTRA_WIDTH", "0"))
    return nn.Sequential(nn.Linear(8, width), block(width))
"""

HELPERS = """\
from torch import nn


def block(width):
    return nn.Linear(width, 2)
"""

OTHER = """\
from torch import nn


def build():
    with open("counted.log", "a") as log:
        log.write("other\\n")
    return nn.Linear(8, 3)
"""


#: The last `check` of the running test: (project, args, env), for the verify pass after it.
LAST_CHECK: list[tuple[Path, tuple[str, ...], dict[str, str]]] = []


@pytest.fixture(autouse=True)
def user_cache_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own `XDG_CACHE_HOME`, where the key that signs records is made: one "user on one machine"."""
    home = tmp_path_factory.mktemp("xdg-cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def verify_after_each_test(user_cache_home: Path):
    """After the test, `check --cache=verify` over its project: no record may disagree with a fresh count."""
    LAST_CHECK.clear()
    yield
    if not LAST_CHECK:
        return
    project, args, env = LAST_CHECK[-1]
    args = tuple(a for a in args if a not in ("--cache", "--no-cache"))
    done = flopbudget(project, "check", "--cache=verify", *args, **{"FLOPBUDGET_NO_CACHE": "", **env})
    assert "cached count differs" not in done.stderr, done.stderr
    assert "internal error" not in done.stderr, done.stderr


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "model.py").write_text(MODEL)
    (tmp_path / "pkg" / "helpers.py").write_text(HELPERS)
    (tmp_path / "pkg" / "config.json").write_text('{"width": 4}')
    (tmp_path / "other.py").write_text(OTHER)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    return tmp_path


def check(project: Path, *args: str, **env: str) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    """Run `flopbudget check`; return the models whose factory ran (in order) and the process."""
    log = project / "counted.log"
    log.unlink(missing_ok=True)
    LAST_CHECK.append((project, args, env))
    done = flopbudget(project, "check", *args, **{"FLOPBUDGET_NO_CACHE": "", **env})
    assert done.returncode in (0, 1), done.stdout + done.stderr
    counted = log.read_text().split() if log.exists() else []
    return counted, done


def flops(done: subprocess.CompletedProcess[str], name: str) -> str:
    line = next(line for line in done.stdout.splitlines() if line.startswith(name + " "))
    return line.split()[2]


def test_second_check_counts_nothing_and_says_so(project: Path) -> None:
    counted, first = check(project)
    assert sorted(counted) == ["other", "small"]
    counted, second = check(project)
    assert counted == [], second.stderr
    assert second.stdout == first.stdout  # the same verdicts, word for word
    assert "2 of 2 models unchanged since their cached count" in second.stderr
    assert (project / ".flopbudget_cache" / "CACHEDIR.TAG").is_file()


@pytest.mark.parametrize(
    "change",
    ["model file", "helper module", "data file", "probed file appears", "environment variable"],
)
def test_a_change_to_what_a_model_read_recounts_that_model_only(project: Path, change: str) -> None:
    check(project)
    env: dict[str, str] = {}
    if change == "model file":
        path = project / "pkg" / "model.py"
        path.write_text(path.read_text().replace("nn.Linear(8, width), block", "nn.Linear(8, width), nn.ReLU(), block"))
    elif change == "helper module":
        (project / "pkg" / "helpers.py").write_text(HELPERS.replace("nn.Linear(width, 2)", "nn.Linear(width, 5)"))
    elif change == "data file":
        (project / "pkg" / "config.json").write_text('{"width": 6}')
    elif change == "probed file appears":
        (project / "pkg" / "override.json").write_text('{"width": 7}')
    else:
        env["SMALL_EXTRA_WIDTH"] = "3"
    counted, done = check(project, **env)
    assert counted == ["small"], done.stderr
    # and the recount is what a check without the cache says
    _, fresh = check(project, "--no-cache", **env)
    assert flops(done, "small") == flops(fresh, "small")


def test_what_no_model_read_recounts_nothing(project: Path) -> None:
    check(project)
    (project / "tests").mkdir()
    (project / "tests" / "test_model.py").write_text("def test_x():\n    pass\n")
    (project / "README.md").write_text("docs\n")
    text = (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(text.replace('flops = "10k"', 'flops = "20k"', 1))  # a ceiling
    counted, done = check(project, UNRELATED_VARIABLE="1")
    assert counted == [], done.stderr


def test_changing_a_model_entry_recounts_it(project: Path) -> None:
    check(project)
    text = (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(text.replace("inputs = [[1, 8]]", "inputs = [[2, 8]]", 1))
    counted, _ = check(project)
    assert counted == ["small"]


def test_editing_the_model_back_is_a_recount_not_an_error(project: Path) -> None:
    check(project)
    path = project / "pkg" / "model.py"
    path.write_text(MODEL + "\n# a comment\n")
    assert check(project)[0] == ["small"]
    path.write_text(MODEL)
    assert check(project)[0] == ["small"]
    assert check(project)[0] == []


def test_a_corrupt_or_truncated_record_is_a_miss(project: Path) -> None:
    check(project)
    records = sorted((project / ".flopbudget_cache" / f"v{STORE_FORMAT}").glob("*.json"))
    assert len(records) == 2
    records[0].write_text(records[0].read_text()[:100])
    records[1].write_text(json.dumps({"format": 1, "key": "x"}))
    counted, done = check(project)
    assert sorted(counted) == ["other", "small"]
    assert "error" not in done.stderr
    assert check(project)[0] == []


def test_no_cache_and_ci_neither_read_nor_write_it(project: Path) -> None:
    counted, _ = check(project, "--no-cache")
    assert sorted(counted) == ["other", "small"]
    assert not (project / ".flopbudget_cache").exists()
    counted, _ = check(project, CI="true")
    assert sorted(counted) == ["other", "small"]
    assert not (project / ".flopbudget_cache").exists()
    check(project)
    assert check(project, CI="true")[0] == ["small", "other"]  # CI ignores an existing cache too
    check(project, "--cache", CI="true")  # unless asked for (torch reads CI itself: this run recounts)
    assert check(project, "--cache", CI="true")[0] == []
    records = {p: p.read_bytes() for p in (project / ".flopbudget_cache").rglob("*.json")}
    assert sorted(check(project, FLOPBUDGET_NO_CACHE="1")[0]) == ["other", "small"]
    assert {p: p.read_bytes() for p in (project / ".flopbudget_cache").rglob("*.json")} == records


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_cache_dir_is_ignored_by_git_and_can_be_moved(project: Path, tmp_path_factory: pytest.TempPathFactory):
    init_repo(project)
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "init")
    (project / "counted.log").unlink(missing_ok=True)
    check(project)
    (project / "counted.log").unlink()
    assert git(project, "status", "--porcelain", "--untracked-files=all") == ""
    elsewhere = tmp_path_factory.mktemp("cache")
    assert sorted(check(project, "--cache-dir", str(elsewhere))[0]) == ["other", "small"]
    assert check(project, FLOPBUDGET_CACHE_DIR=str(elsewhere))[0] == []


def test_an_unwritable_cache_warns_once_and_the_check_still_passes(project: Path) -> None:
    (project / "blocker").write_text("a file where the cache directory would go")
    counted, done = check(project, "--cache-dir", str(project / "blocker" / "cache"))
    assert sorted(counted) == ["other", "small"]
    assert done.returncode == 0
    assert done.stderr.count("warning: count cache") == 1


def test_a_model_that_kills_the_interpreter_fails_alone(project: Path) -> None:
    (project / "other.py").write_text(OTHER + "\n\ndef crash():\n    import os\n    os.abort()\n")
    text = (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(text + '\n[tool.flopbudget.models.crash]\ntarget = "other:crash"\n'
                                            'inputs = [[1, 8]]\nflops = "1k"\n')  # fmt: skip
    done = flopbudget(project, "check", FLOPBUDGET_NO_CACHE="")
    assert done.returncode == 2
    assert "crash: counting crashed the interpreter (signal 6 SIGABRT)" in done.stderr.replace("models.", "")
    assert "small" in done.stdout and "other" in done.stdout


def test_upgrading_a_package_the_model_imports_recounts_it(project: Path, tmp_path_factory: pytest.TempPathFactory):
    """A real `pip install` into a site-packages directory (the user site, via PYTHONUSERBASE), then an upgrade."""
    userbase = tmp_path_factory.mktemp("userbase")
    site_dir = subprocess.run(
        [sys.executable, "-c", "import site; print(site.getusersitepackages())"],
        env=clean_env(PYTHONUSERBASE=str(userbase)), capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip

    def install(version: str, width: int) -> None:
        source = tmp_path_factory.mktemp(f"tinylib-{version}")
        (source / "tinylib").mkdir()
        (source / "tinylib" / "__init__.py").write_text(f"WIDTH = {width}\n")
        (source / "pyproject.toml").write_text(
            textwrap.dedent(f"""\
            [build-system]
            requires = ["setuptools"]
            build-backend = "setuptools.build_meta"
            [project]
            name = "tinylib"
            version = "{version}"
            """)
        )
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-build-isolation",
             "--upgrade", "--target", site_dir, str(source)],
            check=True, capture_output=True, env=clean_env(),
        )  # fmt: skip

    install("1.0", 3)
    (project / "other.py").write_text(OTHER.replace("nn.Linear(8, 3)", "nn.Linear(8, __import__('tinylib').WIDTH)"))
    env = {"PYTHONUSERBASE": str(userbase), "PYTHONPATH": site_dir}
    check(project, **env)
    assert check(project, **env)[0] == []
    install("2.0", 3)  # same code, new version: the count may not change, but it is not trusted blindly
    assert check(project, **env)[0] == ["other"]
    assert any(p.name == "tinylib-2.0.dist-info" for p in Path(site_dir).iterdir())


def test_a_cache_hit_imports_neither_torch_nor_the_models(project: Path) -> None:
    check(project)
    probe = (
        "import runpy, sys\n"
        "sys.argv = ['flopbudget', 'check']\n"
        "try:\n"
        "    runpy.run_module('pytest_flopbudget', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('loaded:', sorted(m for m in ('torch', 'onnx', 'pkg', 'other') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=project, capture_output=True, text=True, check=False,
        env=clean_env(FLOPBUDGET_NO_CACHE=""),
    )  # fmt: skip
    assert "2 of 2 models unchanged" in done.stderr, done.stderr
    assert done.stdout.splitlines()[-1] == "loaded: []"


PRE_COMMIT = Path(sys.executable).parent / "pre-commit"


@pytest.mark.skipif(not PRE_COMMIT.exists() or shutil.which("git") is None, reason="needs pre-commit and git")
def test_the_hook_recounts_only_what_a_commit_changed(project: Path, tmp_path_factory: pytest.TempPathFactory):
    """Real commits through the real pre-commit git hook (`repo: local`, `flopbudget check` in this environment)."""
    env = clean_env(
        FLOPBUDGET_NO_CACHE="", PRE_COMMIT_HOME=str(tmp_path_factory.mktemp("pre-commit-home")),
        PATH=f"{PRE_COMMIT.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1",
    )  # fmt: skip
    (project / ".pre-commit-config.yaml").write_text(
        "repos:\n  - repo: local\n    hooks:\n      - id: flopbudget\n        name: flopbudget\n"
        "        entry: flopbudget check\n        language: system\n        pass_filenames: false\n"
        "        require_serial: true\n        always_run: true\n"
    )
    (project / ".gitignore").write_text("counted.log\n")

    def run(*command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=600)

    def commit(message: str) -> tuple[list[str], subprocess.CompletedProcess[str]]:
        (project / "counted.log").unlink(missing_ok=True)
        run("git", "add", "-A")
        done = run("git", "commit", "-qm", message)
        log = project / "counted.log"
        return (log.read_text().split() if log.exists() else []), done

    for command in (("git", "init", "-q", "-b", "main"), ("git", "config", "user.email", "t@example.invalid"),
                    ("git", "config", "user.name", "t"), ("pre-commit", "install")):  # fmt: skip
        assert run(*command).returncode == 0
    assert run(sys.executable, "-m", "pytest_flopbudget", "check", "--update").returncode == 0
    counted, done = commit("models and baselines")
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(counted) == ["other", "small"]

    (project / "tests").mkdir()
    (project / "tests" / "test_small.py").write_text("def test_small():\n    pass\n")
    counted, done = commit("a test")
    assert done.returncode == 0, done.stdout + done.stderr
    assert counted == []  # the hook ran and counted nothing
    assert "Passed" in done.stderr and "Skipped" not in done.stderr, done.stderr

    (project / "pkg" / "config.json").write_text('{"width": 5}')  # only a data file the model reads
    counted, done = commit("a wider first layer, in the config")
    assert counted == ["small"]
    assert done.returncode == 0, done.stdout + done.stderr

    (project / "pkg" / "helpers.py").write_text(HELPERS.replace("nn.Linear(width, 2)", "nn.Linear(width, 3)"))
    counted, done = commit("a wider head")
    assert counted == ["small"]
    assert done.returncode == 0, done.stdout + done.stderr  # within its ceiling: growth is a warning


HOSTILE = """\
import multiprocessing
import os
import subprocess
import sys
import time

from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))


def uses_subprocess():
    subprocess.run(["true"], check=True)  # reads environ[b"PATH"]
    return nn.Linear(8, 2)


def exits():
    sys.exit(3)


def _sleep():
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # not the output pipes, which any caller would wait for too: only the inherited rest
    os.dup2(devnull, 2)
    time.sleep(600)
    open(os.path.join(HERE, "slept"), "w").close()  # whoever waited for this process sees the file


def leaves_a_process_running():
    worker = multiprocessing.get_context("fork").Process(target=_sleep, daemon=False)
    worker.start()  # holds the result pipe's write end for ten minutes
    with open(os.path.join(HERE, "sleepers"), "a") as pids:
        pids.write(f"{worker.pid}\\n")
    return nn.Linear(8, 2)
"""


def test_models_that_run_processes_or_exit_fail_or_pass_alone_and_never_stall_the_check(project: Path) -> None:
    (project / "hostile.py").write_text(HOSTILE)
    text = (project / "pyproject.toml").read_text()
    for name in ("uses_subprocess", "exits", "leaves_a_process_running"):
        text += f'\n[tool.flopbudget.models.{name}]\ntarget = "hostile:{name}"\ninputs = [[1, 8]]\nflops = "1k"\n'
    (project / "pyproject.toml").write_text(text)
    try:
        done = flopbudget(project, "check", FLOPBUDGET_NO_CACHE="")
        # The left process sleeps 10 minutes, then writes `slept`: a check that waited for it finds the file.
        assert not (project / "slept").exists(), "waited for the process a model left running"
        assert (project / "sleepers").exists(), "the model left no process running"
        assert done.returncode == 2
        stderr = done.stderr.replace("tool.flopbudget.models.", "")
        assert "exits.target: hostile:exits() raised SystemExit: 3" in stderr
        for name in ("uses_subprocess", "leaves_a_process_running", "small", "other"):
            assert f"\n{name} " in "\n" + done.stdout, done.stdout + done.stderr
        assert "internal error" not in done.stderr
        done = flopbudget(project, "check", "--no-cache")
        assert not (project / "slept").exists(), "waited for the process a model left running"
        stderr = done.stderr.replace("tool.flopbudget.models.", "")
        assert "exits.target: hostile:exits() raised SystemExit: 3" in stderr
    finally:
        for pid in (project / "sleepers").read_text().split() if (project / "sleepers").exists() else []:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


def test_every_bundled_example_is_a_hit_on_the_second_check(tmp_path: Path) -> None:
    """This repository's own models (meta-device factories, a training step): each must leave a usable record.
    Torch probes /tmp, which changes all the time; a changing directory must not keep a record from being saved."""
    root = Path(__file__).resolve().parents[2]
    cache = str(tmp_path / "cache")
    first = flopbudget(root, "check", "--cache-dir", cache, FLOPBUDGET_NO_CACHE="")
    assert first.returncode == 0, first.stdout + first.stderr
    second = flopbudget(root, "check", "--cache-dir", cache, FLOPBUDGET_NO_CACHE="")
    models = len(list((root / ".flopbudget").glob("*.json")))
    assert f"{models} of {models} models unchanged since their cached count" in second.stderr, second.stderr
    assert second.stdout == first.stdout
    assert "not cached" not in first.stderr
    verified = flopbudget(root, "check", "--cache=verify", "--cache-dir", cache, FLOPBUDGET_NO_CACHE="")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout == first.stdout
    assert "cached count differs" not in verified.stderr


# -- a model that cannot be cached says why ---------------------------------------------------------------------------

UNCACHEABLE = """\
import contextlib
import json
from pathlib import Path

from torch import nn


def note(reason):
    from pytest_flopbudget._cache import recorder  # what a read no fact can describe does (cache-facts sets it)

    if recorder._ACTIVE:
        recorder._ACTIVE[-1].note_uncacheable(reason)


def runs_a_subprocess():
    note("it ran a subprocess")
    return nn.Linear(8, 2)


def hostile_reason():
    note("it ran \\x1b[2J\\u202eevil")
    return nn.Linear(8, 2)


def rewrites_its_config():
    path = Path(__file__).parent / "settings.json"
    width = json.loads(path.read_text())["width"]
    path.write_text(json.dumps({"width": width}))  # the same value, but the file changed while it was counted
    return nn.Linear(8, width)
"""


def test_a_model_that_cannot_be_cached_is_counted_every_time_and_says_why(project: Path) -> None:
    (project / "odd.py").write_text(UNCACHEABLE)
    (project / "settings.json").write_text('{"width": 3}')
    text = (project / "pyproject.toml").read_text()
    for name in ("runs_a_subprocess", "hostile_reason", "rewrites_its_config"):
        text += f'\n[tool.flopbudget.models.{name}]\ntarget = "odd:{name}"\ninputs = [[1, 8]]\nflops = "1k"\n'
    (project / "pyproject.toml").write_text(text)
    for _ in range(2):
        counted, done = check(project)
        assert "runs_a_subprocess: not cached: it ran a subprocess\n" in done.stderr
        assert "rewrites_its_config: not cached: settings.json changed while it was counted\n" in done.stderr
        assert "hostile_reason: not cached: it ran \\x1b[2J\\u202eevil\n" in done.stderr  # the safe-text filter
        assert "small: not cached" not in done.stderr
    assert counted == []  # small and other: hits
    assert "2 of 5 models unchanged since their cached count" in done.stderr
    records = list((project / ".flopbudget_cache" / f"v{STORE_FORMAT}").glob("*.json"))
    assert len(records) == 2


def test_a_record_that_becomes_uncacheable_is_removed(project: Path) -> None:
    check(project)
    assert len(list((project / ".flopbudget_cache" / f"v{STORE_FORMAT}").glob("*.json"))) == 2
    (project / "odd.py").write_text(UNCACHEABLE)
    (project / "other.py").write_text(OTHER.replace("    return nn.Linear(8, 3)", "    __import__('odd').note("
                                                   "'it ran a subprocess')\n    return nn.Linear(8, 3)"))  # fmt: skip
    counted, done = check(project)
    assert counted == ["other"] and "other: not cached: it ran a subprocess" in done.stderr
    assert len(list((project / ".flopbudget_cache" / f"v{STORE_FORMAT}").glob("*.json"))) == 1


# -- records from elsewhere are not believed --------------------------------------------------------------------------


def key_of(home: Path) -> bytes:
    return bytes.fromhex((home / "flopbudget" / "key").read_text().strip())


def resign(record: Path, key: bytes, edit) -> None:  # type: ignore[no-untyped-def]
    """What someone holding `key` could write: the record's body changed by `edit`, signed again."""
    from pytest_flopbudget._cache import signing as record_signing
    from pytest_flopbudget._cache.store import canonical

    data = json.loads(record.read_text())
    del data["hmac-sha256"]
    edit(data)
    record.write_text(json.dumps({**data, "hmac-sha256": record_signing.sign(key, canonical(data))}))


def record_of(project: Path, name: str) -> Path:
    for path in (project / ".flopbudget_cache" / f"v{STORE_FORMAT}").glob("*.json"):
        if json.loads(path.read_text())["model"] == name:
            return path
    raise AssertionError(f"no record for {name}")


def test_records_from_another_machine_are_recounted_and_say_so(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The same checkout, the cache filled under another user's key (copied from another machine): every record
    is a miss that says so, and then this user's own records are hits."""
    elsewhere = tmp_path_factory.mktemp("other-machine")
    check(project, XDG_CACHE_HOME=str(elsewhere))
    counted, done = check(project)
    assert sorted(counted) == ["other", "small"]
    for name in ("small", "other"):
        assert (f"{name}: cached count not trusted (its record was not written by flopbudget for this user on "
                f"this machine): counted again") in done.stderr  # fmt: skip
    counted, done = check(project)
    assert counted == [] and "not trusted" not in done.stderr


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_record_planted_with_git_add_f_is_not_believed(
    project: Path, tmp_path_factory: pytest.TempPathFactory, user_cache_home: Path
) -> None:
    """A pull request commits `.flopbudget_cache/` with `git add -f`, its record for `small` claiming `other`'s
    figures (signed with the author's own key). The reviewer's check recounts and says so; the author's own
    cache gives the planted answer, and `--cache=verify` catches it."""
    init_repo(project)
    (project / ".gitignore").write_text("counted.log\n")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "models")
    author = tmp_path_factory.mktemp("author")
    _, honest = check(project, XDG_CACHE_HOME=str(author))
    other_report = json.loads(record_of(project, "other").read_text())["report"]
    resign(record_of(project, "small"), key_of(author), lambda data: data.update(report=other_report))
    git(project, "add", "-f", ".flopbudget_cache")
    git(project, "commit", "-q", "-m", "a smaller model, it says")
    assert f".flopbudget_cache/v{STORE_FORMAT}/" in git(project, "ls-files")

    counted, done = check(project)  # the reviewer: this user's key
    assert sorted(counted) == ["other", "small"]
    assert "small: cached count not trusted" in done.stderr
    assert flops(done, "small") == flops(honest, "small")

    git(project, "checkout", "--", ".flopbudget_cache")  # the planted records again, as committed
    counted, planted = check(project, XDG_CACHE_HOME=str(author))  # the author's machine: a stale hit ...
    assert counted == [] and flops(planted, "small") == flops(honest, "other") != flops(honest, "small")
    verified = flopbudget(project, "check", "--cache=verify", FLOPBUDGET_NO_CACHE="", XDG_CACHE_HOME=str(author))
    assert verified.returncode == 1, verified.stdout + verified.stderr  # ... that verify fails on
    small, other = flops(honest, "small"), flops(honest, "other")
    assert re.search(r"^flopbudget: error: small: its cached count differs from a fresh count: flops \d+ cached, "
                     r"\d+ counted$", verified.stderr, re.MULTILINE), verified.stderr  # fmt: skip
    assert flops(verified, "small") == small and small != other
    assert "other: its cached count differs" not in verified.stderr


def test_verify_names_the_figure_a_stale_record_got_wrong(project: Path) -> None:
    """A read the recorder missed, simulated by removing config.json from the record: after config.json changes,
    the record is a stale hit; `--cache=verify` fails with the figures, then stores the fresh count."""
    _, first = check(project)
    key = key_of(Path(os.environ["XDG_CACHE_HOME"]))
    config = str(project / "pkg" / "config.json")
    resign(record_of(project, "small"), key, lambda data: data["dependencies"]["files"].pop(config))
    (project / "pkg" / "config.json").write_text('{"width": 6}')
    counted, stale = check(project)
    assert counted == [] and flops(stale, "small") == flops(first, "small")
    verified = flopbudget(project, "check", "--cache=verify", FLOPBUDGET_NO_CACHE="")
    assert verified.returncode == 1
    # small is Linear(8, w) then Linear(w, 2) on one row: 2*8*w + w (bias) + 2*w*2 + 2 = 21*w + 2 FLOPs? the tool's
    # figures are compared as printed, cached (w=4) against counted (w=6)
    lines = [line for line in verified.stderr.splitlines() if "cached count differs" in line]
    assert len(lines) == 1 and lines[0].startswith("flopbudget: error: small: ") and " cached, " in lines[0]
    counted, after = check(project)
    assert counted == [] and flops(after, "small") == flops(verified, "small") != flops(first, "small")


def test_verify_fails_closed_in_the_json_document_and_every_ci_output(project: Path, tmp_path: Path) -> None:
    """The stale record of the test above, checked with `--cache=verify --format json --report markdown:PATH` on
    GitHub: the mismatch is a violation on `small` in every output, not only a line on stderr. small is
    Linear(8, w) then Linear(w, 2) on one row: 2*8*w + w (bias) + 2*w*2 + 2 (bias) = 21*w + 2 FLOPs, so the
    record (w = 4) says 21*4 + 2 = 86 and the fresh count (w = 6) 21*6 + 2 = 128."""
    check(project)
    key = key_of(Path(os.environ["XDG_CACHE_HOME"]))
    config = str(project / "pkg" / "config.json")
    resign(record_of(project, "small"), key, lambda data: data["dependencies"]["files"].pop(config))
    (project / "pkg" / "config.json").write_text('{"width": 6}')
    summary = tmp_path / "step-summary.md"
    verified = flopbudget(
        project, "check", "--cache=verify", "--format", "json", "--report", "markdown:flops.md",
        FLOPBUDGET_NO_CACHE="", GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(summary),
    )  # fmt: skip
    assert verified.returncode == 1, verified.stderr
    why = "its cached count differs from a fresh count: flops 86 cached, 128 counted"
    assert f"flopbudget: error: small: {why}\n" in verified.stderr  # the stderr line stays
    assert "2 models counted, 1 whose cached count differs from a fresh count\n" in verified.stderr  # the text
    document = json.loads(verified.stdout)
    assert document["passed"] is False
    assert document["counts"]["failed"] == 1 and document["counts"]["errors"] == 1
    models = {model["name"]: model for model in document["models"]}
    assert models["other"]["passed"] is True
    small = models["small"]
    assert small["passed"] is False and small["reason"] == f"small: {why}"
    assert small["metrics"]["flops"]["now"] == 128  # judged on the fresh count
    mismatch = [f for f in small["findings"] if f["kind"] == "cache mismatch"]
    assert len(mismatch) == 1 and mismatch[0]["severity"] == "error" and mismatch[0]["message"] == why
    assert mismatch[0]["source"]["file"] == "pyproject.toml" and mismatch[0]["source"]["line"] == 1
    annotation = "::error file=pyproject.toml,line=1,title=flopbudget%3A small cached count differs from a fresh count"
    assert f"{annotation}::small: {why}\n" in verified.stderr, verified.stderr  # GitHub's, on the model's table
    for markdown in ((project / "flops.md").read_text(), summary.read_text()):
        assert "flopbudget: ❌ 1 of 2 models whose cached count differs from a fresh count" in markdown, markdown
        assert f"small: {why}" in markdown, markdown
    assert "other: its cached count differs" not in verified.stderr


def test_a_fifo_where_a_record_should_be_never_hangs_the_check(project: Path) -> None:
    check(project)
    record = record_of(project, "small")
    record.unlink()
    os.mkfifo(record)
    counted, done = check(project)  # `flopbudget` runs under a timeout: a blocking open would fail the test
    assert counted == ["small"], done.stderr


# -- with and without the cache, each model is counted in the same state ----------------------------------------------

SHARED_STATE = {
    "shared.py": "FACTOR = 1\n",
    "first.py": "import shared\nfrom torch import nn\n\nshared.FACTOR = 4  # a side effect of importing it\n\n\n"
    "def build():\n    return nn.Linear(8, 2)\n",
    "second.py": "import shared\nfrom torch import nn\n\n\ndef build():\n    return nn.Linear(8, 2 * shared.FACTOR)\n",
}


def test_the_cached_and_uncached_paths_agree_when_one_models_import_changes_anothers_state(tmp_path: Path) -> None:
    """`first`'s import sets a global that `second`'s factory reads. Every model is counted in a process of its
    own with the cache and without it, so `second` never sees it: Linear(8, 2*1) on one row is 2*8*2 = 32 FLOPs
    of matmul plus 2 of bias = 34 FLOPs, never Linear(8, 2*4)'s 2*8*8 + 8 = 136, whichever models are hits."""
    for name, text in SHARED_STATE.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.flopbudget.models.first]\ntarget = "first:build"\ninputs = [[1, 8]]\nflops = "1k"\n\n'
        '[tool.flopbudget.models.second]\ntarget = "second:build"\ninputs = [[1, 8]]\nflops = "1k"\n'
    )
    LAST_CHECK.append((tmp_path, (), {}))
    uncached = flopbudget(tmp_path, "check", "--no-cache")
    missed = flopbudget(tmp_path, "check", FLOPBUDGET_NO_CACHE="")
    (tmp_path / "second.py").write_text(SHARED_STATE["second.py"] + "# edited: second recounts, first is a hit\n")
    partly = flopbudget(tmp_path, "check", FLOPBUDGET_NO_CACHE="")
    assert "1 of 2 models unchanged" in partly.stderr
    assert uncached.stdout == missed.stdout == partly.stdout
    assert flops(uncached, "second") == "34"


CURVE_MODEL = """\
import torch
from torch import nn

from pkg.helpers import block


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = block(8)

    def forward(self, x):
        with open("counted.log", "a") as log:
            log.write("curve\\n")
        y = self.proj(x)
        return torch.softmax(y @ y.transpose(-1, -2), dim=-1) @ y


def build():
    return Attention()
"""

CURVE_TABLE = """
[tool.flopbudget.models.curve]
target = "pkg.attention:build"
inputs = [[1, "seq", 8]]
dims = { seq = 32 }
curve = { seq = [8, 64] }
flops = "10M"
max-degree = { seq = 2 }
at = [{ seq = 64, flops = "10M" }]
"""


def test_a_model_with_a_curve_is_cached_with_its_formula_and_recounted_when_what_it_read_changes(
    project: Path,
) -> None:
    (project / "pkg" / "attention.py").write_text(CURVE_MODEL)
    pyproject = project / "pyproject.toml"
    pyproject.write_text(PYPROJECT + CURVE_TABLE)
    counted, first = check(project)
    assert counted.count("curve") > 5 and "not cached" not in first.stderr, first.stderr  # every point of the curve
    counted, second = check(project)
    assert counted == [], second.stderr  # the formula too came from the record
    assert "3 of 3 models unchanged since their cached count" in second.stderr
    assert second.stdout == first.stdout  # the same verdicts, judged on the same formula
    # a budget on the curve judges the count, it does not change it: editing it recounts nothing
    pyproject.write_text(
        pyproject.read_text().replace('at = [{ seq = 64, flops = "10M" }]', 'at = [{ seq = 64, flops = "1k" }]')
    )
    counted, tighter = check(project)
    assert counted == [] and tighter.returncode == 1 and "FLOPs at seq=64:" in tighter.stdout
    # the range does: a new formula, counted
    pyproject.write_text(pyproject.read_text().replace("curve = { seq = [8, 64] }", "curve = { seq = [8, 128] }"))
    counted, _ = check(project)
    assert "curve" in counted and "small" not in counted
    # and so does a file any point of the curve read (the helper every count imports)
    (project / "pkg" / "helpers.py").write_text(HELPERS.replace("nn.Linear(width, 2)", "nn.Linear(width, 8)"))
    counted, _ = check(project)
    assert "curve" in counted and "small" in counted and "other" not in counted
