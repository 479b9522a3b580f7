"""The count cache, end to end: `flopbudget check` run twice in a real project, changing one thing in between.

Each model's factory appends its name to `counted.log` when it runs (a write-only open, which is not an input), so
"was it recounted?" is read from what really happened, not from what the tool says about itself. Every way a
count's inputs can change must recount exactly the models that read it: the model's own file, a helper module it
imports, a data file it reads, a file whose absence it probed, an environment variable, an installed package's
version; and nothing else may (a ceiling edit, a test file, another model's file).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from e2e_helpers import clean_env, flopbudget, git, init_repo

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
    assert counted == []
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
    records = sorted((project / ".flopbudget_cache" / "v1").glob("*.json"))
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
        (source / "pyproject.toml").write_text(textwrap.dedent(f"""\
            [build-system]
            requires = ["setuptools"]
            build-backend = "setuptools.build_meta"
            [project]
            name = "tinylib"
            version = "{version}"
            """))
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
        "        require_serial: true\n        files: (\\.py|(?i:\\.onnx)|(^|/)pyproject\\.toml)$|(^|/)\\.flopbudget/\n"
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
    assert counted == []  # the hook ran (a .py file changed) and counted nothing

    (project / "pkg" / "helpers.py").write_text(HELPERS.replace("nn.Linear(width, 2)", "nn.Linear(width, 3)"))
    counted, done = commit("a wider head")
    assert counted == ["small"]
    assert done.returncode == 0, done.stdout + done.stderr  # within its ceiling: growth is a warning


HOSTILE = """\
import multiprocessing
import subprocess
import sys
import time

from torch import nn


def uses_subprocess():
    subprocess.run(["true"], check=True)  # reads environ[b"PATH"]
    return nn.Linear(8, 2)


def exits():
    sys.exit(3)


def _sleep():
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # not the output pipes, which any caller would wait for too: only the inherited rest
    os.dup2(devnull, 2)
    time.sleep(60)


def leaves_a_process_running():
    worker = multiprocessing.get_context("fork").Process(target=_sleep, daemon=False)
    worker.start()  # holds the result pipe's write end for a minute
    return nn.Linear(8, 2)
"""


def test_models_that_run_processes_or_exit_fail_or_pass_alone_and_never_stall_the_check(project: Path) -> None:
    import time

    (project / "hostile.py").write_text(HOSTILE)
    text = (project / "pyproject.toml").read_text()
    for name in ("uses_subprocess", "exits", "leaves_a_process_running"):
        text += f'\n[tool.flopbudget.models.{name}]\ntarget = "hostile:{name}"\ninputs = [[1, 8]]\nflops = "1k"\n'
    (project / "pyproject.toml").write_text(text)
    start = time.monotonic()
    done = flopbudget(project, "check", FLOPBUDGET_NO_CACHE="")
    assert time.monotonic() - start < 45, "waited for the process a model left running"
    assert done.returncode == 2
    assert "exits.target: hostile:exits() raised SystemExit: 3" in done.stderr.replace("tool.flopbudget.models.", "")
    for name in ("uses_subprocess", "leaves_a_process_running", "small", "other"):
        assert f"\n{name} " in "\n" + done.stdout, done.stdout + done.stderr
    assert "internal error" not in done.stderr
    done = flopbudget(project, "check", "--no-cache")
    assert "exits.target: hostile:exits() raised SystemExit: 3" in done.stderr.replace("tool.flopbudget.models.", "")


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
