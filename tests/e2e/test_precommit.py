"""The real `pre-commit` on real commits in temporary git repositories, both ways of running the hook.

1. `repo: local` with `language: system` and `entry: flopbudget check`: the hook runs in the project's own
   environment (here: this test's virtualenv, put first on PATH as an activated venv would), so it can import the
   project's models and torch. This is the set-up docs/cli.md recommends for PyTorch projects.
2. The published hook (`.pre-commit-hooks.yaml`, `language: python`) from a git repository made of this working
   tree, configured as the README says (pinned by a release tag): pre-commit builds a virtualenv and pip-installs
   pytest-flopbudget plus
   `additional_dependencies` into it. Installing torch that way takes minutes, so this case uses an ONNX-only
   project (`additional_dependencies: [onnx]`, no torch); installing the environment still takes about a minute.

Every scenario checks that the hook leaves the work tree exactly as it found it (`git status --porcelain`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from onnx_helpers import NET_PYPROJECT, write_onnx

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PRE_COMMIT = BIN / "pre-commit"

pytestmark = pytest.mark.skipif(
    not PRE_COMMIT.exists() or shutil.which("git") is None, reason="needs pre-commit in the venv and git"
)

HOOK_NAME = "flopbudget (compute budgets)"

TORCH_MODELS = """\
from torch import nn

HIDDEN = 4


class MLP(nn.Module):
    \"\"\"A two-layer perceptron; HIDDEN is the width a careless commit changes.\"\"\"

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, HIDDEN)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(HIDDEN, 2)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))
"""


def published_hook() -> dict[str, Any]:
    import yaml

    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    return next(hook for hook in hooks if hook["id"] == "flopbudget")


def test_the_published_hook_runs_on_every_commit() -> None:
    """A model can read any file (a JSON config): no filename filter can say which commits may change a count."""
    hook = published_hook()
    assert hook.get("always_run") is True
    assert "files" not in hook and "types" not in hook and "types_or" not in hook


def local_hook_config(language: str) -> str:
    """A .pre-commit-config.yaml with a `repo: local` hook running `flopbudget check` with this `language:`, and
    the published hook's file selection."""
    return (
        "repos:\n"
        "  - repo: local\n"
        "    hooks:\n"
        "      - id: flopbudget\n"
        f"        name: {HOOK_NAME}\n"
        "        entry: flopbudget check\n"
        f"        language: {language}\n"
        "        pass_filenames: false\n"
        "        require_serial: true\n"
        f"        always_run: {str(published_hook().get('always_run', False)).lower()}\n"
    )


def environment(home: Path) -> dict[str, str]:
    """An activated-venv environment, without the outer test run's settings and with bytecode writing on, so a
    stray `__pycache__` would show up in `git status`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "PRE_COMMIT", "GIT_")) and k != "PYTHONDONTWRITEBYTECODE"
    }
    env.update(
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        PRE_COMMIT_HOME=str(home),
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
    )
    return env


class Repo:
    """A git work tree with pre-commit installed as its git hook."""

    def __init__(self, path: Path, env: dict[str, str]) -> None:
        self.path = path
        self.env = env

    def run(self, *command: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(command, cwd=self.path, env=self.env, capture_output=True, text=True, timeout=timeout)

    def git(self, *args: str) -> subprocess.CompletedProcess[str]:
        result = self.run("git", *args)
        assert result.returncode == 0, result.stdout + result.stderr
        return result

    def init(self) -> None:
        self.git("init", "-q", "-b", "main")
        self.git("config", "user.name", "Test")
        self.git("config", "user.email", "test@example.invalid")
        self.git("config", "commit.gpgsign", "false")

    def write(self, name: str, text: str) -> None:
        (self.path / name).parent.mkdir(parents=True, exist_ok=True)
        (self.path / name).write_text(text)

    def commit(self, message: str, *paths: str) -> subprocess.CompletedProcess[str]:
        """`git add PATHS && git commit`: the git hook runs pre-commit, as on a developer's machine."""
        self.git("add", *(paths or ["-A"]))
        result = self.run("git", "commit", "-m", message)
        result.output = result.stdout + result.stderr  # type: ignore[attr-defined]
        return result

    def status(self) -> str:
        return self.git("status", "--porcelain", "--untracked-files=all").stdout

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").stdout.strip()

    def reset(self) -> None:
        self.git("reset", "-q", "--hard", "HEAD")

    def install_and_commit(self) -> None:
        """`pre-commit install`, then the first commit; its result (the hook's first run) is kept in `initial`."""
        assert self.run(str(PRE_COMMIT), "install").returncode == 0
        self.initial = self.commit("initial")


def hook_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith(HOOK_NAME)]
    assert len(lines) == 1, output
    return lines[0]


def assert_went_through(repo: Repo, result: subprocess.CompletedProcess[str], hook: str = "Passed") -> None:
    """The commit succeeded, the hook's line ends with HOOK, and the hook left the work tree as it found it."""
    assert result.returncode == 0, result.output  # type: ignore[attr-defined]
    assert hook_line(result.output).endswith(hook)  # type: ignore[attr-defined]
    assert repo.status() == "", "the hook wrote files"


def commit_to_readme(repo: Repo, text: str) -> subprocess.CompletedProcess[str]:
    """From a clean tree, append TEXT to README.md and commit only that file."""
    repo.reset()
    with (repo.path / "README.md").open("a") as handle:
        handle.write(text)
    return repo.commit("docs", "README.md")


# -- 1. repo: local, language: system, in the project's environment ---------------------------------------------------


@pytest.fixture(scope="module")
def local_repo(tmp_path_factory):
    pytest.importorskip("torch")
    base = tmp_path_factory.mktemp("precommit_local")
    repo = Repo(base / "project", environment(base / "pre-commit-home"))
    repo.path.mkdir()
    repo.init()
    repo.write("models.py", TORCH_MODELS)
    repo.write(
        "pyproject.toml",
        '[project]\nname = "demo"\n\n'
        '[tool.flopbudget.models.mlp]\ntarget = "models:MLP"\ninputs = [[2, 8]]\nflops = "200"\n',
    )
    repo.write("README.md", "# demo\n")
    repo.write(".pre-commit-config.yaml", local_hook_config("system"))
    update = repo.run("flopbudget", "check", "--update")
    assert update.returncode == 0, update.stdout + update.stderr
    repo.install_and_commit()
    return repo


def test_initial_commit_under_budget_passes(local_repo):
    assert_went_through(local_repo, local_repo.initial)


def test_a_commit_under_budget_passes(local_repo):
    local_repo.reset()
    models = (local_repo.path / "models.py").read_text()
    local_repo.write("models.py", models.replace("a careless commit changes", "a careless commit would change"))
    before = local_repo.head()
    result = local_repo.commit("reword a docstring", "models.py")
    assert_went_through(local_repo, result)
    assert local_repo.head() != before


def test_a_readme_only_commit_runs_the_hook_too(local_repo):
    result = commit_to_readme(local_repo, "More words.\n")
    assert_went_through(local_repo, result)


#: A model whose width is in a JSON file: a commit can change its count without touching any Python file.
CONFIGURED_MODEL = """\
import json
from pathlib import Path

from torch import nn


def build():
    hidden = json.loads((Path(__file__).parent / "model.json").read_text())["hidden"]
    return nn.Sequential(nn.Linear(8, hidden), nn.ReLU(), nn.Linear(hidden, 2))
"""


def test_a_commit_changing_only_a_json_the_model_reads_is_checked_and_fails(tmp_path):
    """+57.7% once went in as "(no files to check) Skipped": the hook must run, and the cache must recount."""
    pytest.importorskip("torch")
    env = environment(tmp_path / "pre-commit-home")
    env.update(FLOPBUDGET_NO_CACHE="", XDG_CACHE_HOME=str(tmp_path / "xdg"))  # the cache on, as users have it
    repo = Repo(tmp_path / "project", env)
    repo.path.mkdir()
    repo.init()
    repo.write("models.py", CONFIGURED_MODEL)
    repo.write("model.json", '{"hidden": 4}\n')
    # Linear(8, 4), ReLU, Linear(4, 2) on 2 rows: 2*2*8*4 + 2*4 + 2*4 + 2*2*4*2 + 2*2 = 128+8+8+32+4 = 180 FLOPs
    repo.write("pyproject.toml", '[tool.flopbudget.models.mlp]\ntarget = "models:build"\ninputs = [[2, 8]]\n'
               'flops = "200"\n')  # fmt: skip
    repo.write(".pre-commit-config.yaml", local_hook_config("system"))
    update = repo.run("flopbudget", "check", "--update")
    assert update.returncode == 0, update.stdout + update.stderr
    repo.install_and_commit()
    assert_went_through(repo, repo.initial)

    repo.write("model.json", '{"hidden": 8}\n')  # 2*2*8*8 + 16 + 16 + 2*2*8*2 + 4 = 256+16+16+64+4 = 356 FLOPs
    result = repo.commit("a wider hidden layer, in the config", "model.json")
    assert result.returncode != 0, result.output  # type: ignore[attr-defined]
    assert hook_line(result.output).endswith("Failed")  # type: ignore[attr-defined]
    assert "mlp: 356 FLOPs > budget 200 FLOPs (+78.0%); baseline 180 FLOPs" in result.output  # type: ignore[attr-defined]
    assert repo.status() == "M  model.json\n"


def test_widening_a_layer_fails_with_the_overrun_and_the_per_layer_diff(local_repo):
    local_repo.reset()
    models = (local_repo.path / "models.py").read_text()
    local_repo.write("models.py", re.sub(r"HIDDEN = \d+", "HIDDEN = 64", models))
    before = local_repo.head()
    result = local_repo.commit("widen the hidden layer", "models.py")
    try:
        assert result.returncode != 0, result.output
        assert hook_line(result.output).endswith("Failed")
        assert "- exit code: 1" in result.output
        assert re.search(r"^mlp: [\d,.]+ k?FLOPs > budget 200 FLOPs \(\+[\d.]+%\); baseline \d+ FLOPs$",
                         result.output, re.MULTILINE), result.output  # fmt: skip
        assert "FLOPs per layer, against .flopbudget/mlp.json:" in result.output
        assert re.search(r"^  fc1 +\d+ +[\d.]+k? +\+[\d.]+k? \(\+[\d.]+%\)$", result.output, re.MULTILINE)
        assert "1 model counted, 1 over budget" in result.output
        assert local_repo.head() == before, "the commit was stopped"
        assert local_repo.status() == "M  models.py\n", "only the user's staged change: the hook wrote nothing"
    finally:
        local_repo.reset()


def test_raising_the_budget_and_the_baseline_in_the_same_commit_passes(local_repo):
    """The intended way to accept a bigger model: new budget and `flopbudget check --update`, reviewed together."""
    local_repo.reset()
    models = (local_repo.path / "models.py").read_text()
    local_repo.write("models.py", re.sub(r"HIDDEN = \d+", "HIDDEN = 8", models))
    pyproject = (local_repo.path / "pyproject.toml").read_text()
    local_repo.write("pyproject.toml", re.sub(r'flops = "\d+"', 'flops = "400"', pyproject))
    update = local_repo.run("flopbudget", "check", "--update")
    assert update.returncode == 0, update.stdout
    result = local_repo.commit("wider MLP, budget 400 FLOPs")
    assert_went_through(local_repo, result)


# -- 2. the published hook, installed by pre-commit from a git repository ---------------------------------------------

#: Files pre-commit's `pip install .` needs from this repository.
PACKAGE_FILES = ("pyproject.toml", "README.md", "LICENSE", ".pre-commit-hooks.yaml", "pytest_flopbudget")

#: pip failures that mean "no package index reachable", not "this package does not install".
OFFLINE = ("No matching distribution found for onnx", "Failed to establish a new connection",
           "Temporary failure in name resolution", "Network is unreachable")  # fmt: skip


def hook_repository(path: Path, env: dict[str, str], tag: str | None = None) -> str:
    """A git repository holding this working tree's package and hook manifest, its commit tagged TAG; returns the
    commit."""
    path.mkdir()
    for name in PACKAGE_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, path / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif source.exists():
            shutil.copy2(source, path / name)
    repo = Repo(path, env)
    repo.init()
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "pytest-flopbudget hook")
    if tag is not None:
        repo.git("tag", "-a", tag, "-m", f"pytest-flopbudget {tag}")
    return repo.head()


def readme_published_hook() -> str:
    """The `.pre-commit-config.yaml` for the published hook, pinned by a release tag (docs/getting-started.md,
    "Releases, by tag", moved there from the README)."""
    text = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    return next(block for block in re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL) if "\n    rev: " in block)


def test_the_readmes_config_for_the_published_hook_is_valid_and_names_a_published_hook(tmp_path: Path) -> None:
    import yaml

    config = tmp_path / ".pre-commit-config.yaml"
    config.write_text(readme_published_hook(), encoding="utf-8")
    for command in ("validate-config", str(config)), ("validate-manifest", str(ROOT / ".pre-commit-hooks.yaml")):
        done = subprocess.run([str(PRE_COMMIT), *command], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stderr == "", done.stdout + done.stderr
    (repo,) = yaml.safe_load(config.read_text(encoding="utf-8"))["repos"]
    assert repo["repo"] == "https://github.com/OWNER/pytest-flopbudget"
    assert re.fullmatch(r"v\d+\.\d+\.\d+", repo["rev"]), "a release tag (the release workflow publishes vX.Y.Z)"
    assert [hook["id"] for hook in repo["hooks"]] == [published_hook()["id"]]


def onnx_project(path: Path, env: dict[str, str], config: str) -> Repo:
    repo = Repo(path, env)
    path.mkdir()
    repo.init()
    write_onnx(path / "net.onnx", channels=4)
    repo.write("pyproject.toml", NET_PYPROJECT)
    repo.write("README.md", "# an ONNX model\n")
    repo.write(".pre-commit-config.yaml", config)
    update = repo.run("flopbudget", "check", "--update")
    assert update.returncode == 0, update.stdout + update.stderr
    return repo


@pytest.fixture(scope="module")
def published_repo(tmp_path_factory):
    import yaml

    base = tmp_path_factory.mktemp("precommit_published")
    env = environment(base / "pre-commit-home")
    # the README's configuration, with this working tree's repository (tagged as the README's rev) in place of
    # GitHub's and an ONNX-only project's dependencies
    readme = yaml.safe_load(readme_published_hook())
    (entry,) = readme["repos"]
    hook_repository(base / "hook", env, tag=entry["rev"])
    entry["repo"] = str(base / "hook")
    (hook,) = entry["hooks"]
    hook["additional_dependencies"] = ["onnx"]
    config = yaml.safe_dump(readme, sort_keys=False)
    repo = onnx_project(base / "project", env, config)
    install = repo.run(str(PRE_COMMIT), "install-hooks", timeout=1200)
    output = install.stdout + install.stderr
    if install.returncode != 0 and any(marker in output for marker in OFFLINE):
        pytest.skip(f"pip cannot reach a package index to build the hook's environment: {output[-300:]}")
    assert install.returncode == 0, output
    repo.install_and_commit()
    return repo


@pytest.mark.slow  # pre-commit pip-installs the hook's environment: about a minute
def test_published_hook_passes_under_budget(published_repo):
    assert_went_through(published_repo, published_repo.initial)


@pytest.mark.slow  # pre-commit pip-installs the hook's environment: about a minute
def test_published_hook_runs_on_a_readme_only_commit(published_repo):
    result = commit_to_readme(published_repo, "Exported from PyTorch.\n")
    assert_went_through(published_repo, result)


@pytest.mark.slow  # pre-commit pip-installs the hook's environment: about a minute
def test_published_hook_fails_on_a_widened_onnx_layer(published_repo):
    published_repo.reset()
    write_onnx(published_repo.path / "net.onnx", channels=16)
    result = published_repo.commit("re-export with 16 channels", "net.onnx")
    try:
        assert result.returncode != 0, result.output
        assert hook_line(result.output).endswith("Failed")
        assert "net: 113 kFLOPs > budget 30.0 kFLOPs (+275.5%); baseline 28.2 kFLOPs" in result.output
        assert "FLOPs per layer, against .flopbudget/net.json:" in result.output
        assert re.search(r"^  features\.conv +27\.6k +111k +\+82\.9k \(\+300\.0%\)$", result.output, re.MULTILINE)
        assert published_repo.status() == "M  net.onnx\n"
    finally:
        published_repo.reset()


# -- `language: unsupported`, the name pre-commit >= 4.4 gives `system` ------------------------------------------------


def pre_commit_version() -> tuple[int, ...]:
    result = subprocess.run([str(PRE_COMMIT), "--version"], capture_output=True, text=True)
    return tuple(int(part) for part in re.findall(r"\d+", result.stdout)[:3])


@pytest.mark.skipif(PRE_COMMIT.exists() and pre_commit_version() < (4, 4), reason="pre-commit < 4.4")
def test_local_hook_with_language_unsupported(tmp_path):
    config = local_hook_config("unsupported")
    repo = onnx_project(tmp_path / "project", environment(tmp_path / "home"), config)
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "initial")  # pre-commit is not installed as the git hook here
    result = repo.run(str(PRE_COMMIT), "run", "--all-files")
    assert result.returncode == 0, result.stdout
    assert hook_line(result.stdout).endswith("Passed")
    assert repo.status() == ""
    write_onnx(repo.path / "net.onnx", channels=16)
    result = repo.run(str(PRE_COMMIT), "run", "--all-files")
    assert result.returncode == 1
    assert "net: 113 kFLOPs > budget 30.0 kFLOPs" in result.stdout
    assert repo.status() == " M net.onnx\n"
