"""The release, for real: the sdist and wheel `python -m build` makes, `twine check --strict` on them, and the
wheel installed into a fresh virtualenv, where the "Use it in your project" steps (docs/getting-started.md) and the
action's steps run against it instead of this checkout.

The build runs on a copy of this working tree (the checkout is left as it was) without build isolation
(setuptools comes from the dev extra: no index needed, seconds instead of a download). The fresh virtualenv sees
the suite's installed packages (torch, pytest, pre-commit) through a folder of links to them that leaves out
pytest-flopbudget itself, the editable install included, so the only pytest-flopbudget it can import, run or load
as a pytest plugin is the wheel's; `PYTHONPATH` is dropped for the same reason. The README's `pip install` line is
run as written in that virtualenv, with the wheel's folder in place of the package index.
"""

from __future__ import annotations

import configparser
import email
import importlib.util
import json
import os
import re
import runpy
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e_helpers import clean_env, git, run_action_step, step_outputs
from export_formats import BENCHER_SCHEMA, parse_openmetrics, validate_benchmark
from fake_github import NUMBER, FakeGitHub, pull_request_env, serving
from test_onboarding import blocks, commands, pull_request, readme_section

from pytest_flopbudget._reporters.pr_comment import MARKER

yaml = pytest.importorskip("yaml")
pytest.importorskip("torch")

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
VERSION: str = runpy.run_path(str(ROOT / "pytest_flopbudget" / "_version.py"))["__version__"]
DIST_INFO = f"pytest_flopbudget-{VERSION}.dist-info"

#: Read at import, before the suite's autouse fixture hides the CI variables from the tests.
IN_CI = bool(os.environ.get("CI"))

#: What a build never needs from the working tree (the .gitignore entries, and git's own folder).
NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", "*.pyc", "*.egg-info", "build", "dist", ".*_cache", ".flopbudget_cache",
    ".hypothesis", "*.onnx", "*.onnx.data",
)  # fmt: skip

#: The package's modules, as this working tree has them: the wheel and the sdist must hold exactly these.
MODULES = sorted(
    path.relative_to(ROOT).as_posix()
    for path in (ROOT / "pytest_flopbudget").rglob("*.py")
    if "__pycache__" not in path.parts
)


def needs(module: str) -> None:
    """Skip where the dev extra is not installed; fail in CI, where it always is (nothing CI runs is skipped)."""
    if importlib.util.find_spec(module) is None:
        message = f"{module} is not installed (pip install -e '.[dev]')"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env or no_checkout_env(), timeout=600)
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    return done


def no_checkout_env(**overrides: str) -> dict[str, str]:
    """A clean environment in which no PYTHONPATH points Python at a checkout of pytest-flopbudget."""
    env = clean_env(**overrides)
    env.pop("PYTHONPATH", None)
    return env


@dataclass(frozen=True)
class Distributions:
    wheel: Path
    sdist: Path


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Distributions:
    """`python -m build` on a copy of this working tree: the sdist, then the wheel built from the sdist."""
    needs("build")
    base = tmp_path_factory.mktemp("release")
    source = base / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCE)
    out = base / "dist"
    run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)], cwd=base)
    built = sorted(path.name for path in out.iterdir())
    assert built == [f"pytest_flopbudget-{VERSION}-py3-none-any.whl", f"pytest_flopbudget-{VERSION}.tar.gz"]
    return Distributions(wheel=out / built[0], sdist=out / built[1])


def twine_check(*paths: Path) -> subprocess.CompletedProcess[str]:
    needs("twine")
    command = [sys.executable, "-m", "twine", "check", "--strict", *map(str, paths)]
    return subprocess.run(command, capture_output=True, text=True, env=no_checkout_env(NO_COLOR="1"), timeout=120)


def test_twine_check_strict_passes_both_distributions(dist: Distributions) -> None:
    done = twine_check(dist.wheel, dist.sdist)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_twine_check_strict_fails_a_wheel_without_its_description(dist: Distributions, tmp_path: Path) -> None:
    """The control: twine does read the metadata (a wheel whose README did not make it in is refused)."""
    broken = tmp_path / dist.wheel.name
    with zipfile.ZipFile(dist.wheel) as source, zipfile.ZipFile(broken, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == f"{DIST_INFO}/METADATA":
                data = data.split(b"\n\n", 1)[0] + b"\n"  # the headers without the body (the README)
            target.writestr(item, data)
    done = twine_check(broken)
    assert done.returncode != 0, done.stdout
    assert "long_description" in done.stdout + done.stderr


def entry_points(wheel: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    with zipfile.ZipFile(wheel) as archive:
        parser.read_string(archive.read(f"{DIST_INFO}/entry_points.txt").decode())
    return parser


def test_the_wheel_holds_the_package_its_entry_points_and_nothing_else(dist: Distributions) -> None:
    with zipfile.ZipFile(dist.wheel) as archive:
        names = archive.namelist()
        metadata = email.message_from_bytes(archive.read(f"{DIST_INFO}/METADATA"))
    assert sorted(name for name in names if name.endswith(".py")) == MODULES
    assert "pytest_flopbudget/py.typed" in names  # PEP 561: type checkers read the package's own hints
    assert f"{DIST_INFO}/licenses/LICENSE" in names
    others = {name for name in names if not name.startswith(f"{DIST_INFO}/") and not name.endswith(".py")}
    assert others == {"pytest_flopbudget/py.typed"}, "no tests, examples, benchmarks or data files"
    assert metadata["Name"] == "pytest-flopbudget"
    assert metadata["Version"] == VERSION
    assert metadata["License-Expression"] == "MIT"
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert "pytest>=7" in metadata.get_all("Requires-Dist")
    assert {"torch", "onnx", "dev"} <= set(metadata.get_all("Provides-Extra"))
    points = entry_points(dist.wheel)
    assert dict(points["console_scripts"]) == {"flopbudget": "pytest_flopbudget._cli:console_main"}
    assert dict(points["pytest11"]) == {"flopbudget": "pytest_flopbudget._plugin"}


def test_the_published_hook_and_the_action_run_the_wheels_command(dist: Distributions) -> None:
    """The pre-commit hook (`.pre-commit-hooks.yaml`) and the action call `flopbudget`: the wheel's console script."""
    scripts = set(entry_points(dist.wheel)["console_scripts"])
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert {hook["entry"].split()[0] for hook in hooks} == {"flopbudget"} <= scripts
    assert all(hook["language"] == "python" for hook in hooks)  # pre-commit pip-installs the tagged repository
    action = (ROOT / "action.yml").read_text(encoding="utf-8")
    assert "flopbudget --version" in action and "command=(flopbudget check)" in action


def test_the_sdist_holds_what_the_wheel_is_built_from_and_nothing_else(dist: Distributions) -> None:
    prefix = f"pytest_flopbudget-{VERSION}/"
    with tarfile.open(dist.sdist) as archive:
        names = [name for name in archive.getnames() if name != prefix.rstrip("/")]
    assert all(name.startswith(prefix) for name in names)
    files = {name[len(prefix) :] for name in names}
    assert {"pyproject.toml", "README.md", "LICENSE", "PKG-INFO"} <= files
    assert sorted(name for name in files if name.endswith(".py")) == MODULES
    assert not {name.split("/")[0] for name in files} & {"tests", "examples", "benchmarks", "docs", ".github"}


# -- the wheel in a fresh virtualenv --------------------------------------------------------------------------------


@dataclass(frozen=True)
class FreshVenv:
    path: Path
    dist: Path

    @property
    def bin(self) -> Path:
        return self.path / "bin"

    def env(self, **overrides: str) -> dict[str, str]:
        """The virtualenv activated: its bin first on PATH, no PYTHONPATH."""
        path = os.pathsep.join([str(self.bin), os.environ.get("PATH", "")])
        return no_checkout_env(PATH=path, VIRTUAL_ENV=str(self.path), PIP_DISABLE_PIP_VERSION_CHECK="1", **overrides)

    def sh(self, command: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", command], cwd=cwd, capture_output=True, text=True, env=self.env(**env), timeout=300
        )


def suite_packages_without_this_one(view: Path) -> Path:
    """Links to every package the suite's Python has installed, pytest-flopbudget and its editable hooks left out."""
    view.mkdir()
    folders = [Path(entry) for entry in sys.path if Path(entry).name in ("site-packages", "dist-packages")]
    for folder in dict.fromkeys(path.resolve() for path in folders if path.is_dir()):
        for entry in folder.iterdir():
            name = entry.name.lower().replace("-", "_")
            if name.startswith(("pytest_flopbudget", "__editable__")) or name.endswith((".pth", ".egg-link")):
                continue
            if not (view / entry.name).exists():
                (view / entry.name).symlink_to(entry)
    return view


def readme_install_command(dist: Path) -> str:
    """Step 1 of docs/getting-started.md, with the folder holding the wheel in place of the package indexes."""
    line = next(command for command in commands() if command.startswith("pip install"))
    local = re.sub(r"--extra-index-url \S+", f"--no-index --find-links {dist}", line)
    assert local != line and '"pytest-flopbudget[torch]"' in local
    return local


@pytest.fixture(scope="module")
def venv(dist: Distributions, tmp_path_factory: pytest.TempPathFactory) -> FreshVenv:
    """A new virtualenv into which the README's install line installs the wheel.

    Made without pip: the setuptools ensurepip puts in a Python 3.11 virtualenv would shadow the suite's (torch
    requires a newer one), so `pip` there is the suite's pip, and `pre-commit` the suite's pre-commit, each run by
    the virtualenv's Python as the commands a user's virtualenv has.
    """
    base = tmp_path_factory.mktemp("wheel_venv")
    fresh = FreshVenv(base / "venv", dist.wheel.parent)
    run([sys.executable, "-m", "venv", "--without-pip", str(fresh.path)], cwd=base)
    for command, module in (("pip", "pip"), ("pre-commit", "pre_commit")):
        launcher = fresh.bin / command
        launcher.write_text(f'#!/bin/sh\nexec "$(dirname "$0")/python" -m {module} "$@"\n', encoding="utf-8")
        launcher.chmod(0o755)
    purelib = run(
        [str(fresh.bin / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=base
    ).stdout.strip()
    view = suite_packages_without_this_one(base / "suite-packages")
    (Path(purelib) / "suite-packages.pth").write_text(f"{view}\n", encoding="utf-8")
    done = fresh.sh(readme_install_command(fresh.dist), cwd=base)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Successfully installed pytest-flopbudget-{VERSION}" in done.stdout, done.stdout
    return fresh


def test_the_fresh_venv_imports_and_runs_the_wheel_and_nothing_else(venv: FreshVenv, tmp_path: Path) -> None:
    probe = (
        "import importlib.metadata as m, pytest_flopbudget as p;"
        "print(p.__file__);"
        "print(sorted(d.metadata['Name'] for d in m.distributions() if d.metadata['Name'] == 'pytest-flopbudget'));"
        "print(m.version('pytest-flopbudget'))"
    )
    done = venv.sh(f"command -v flopbudget && python -c {probe!r} && flopbudget --version", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    script, module, distributions, version, printed = done.stdout.splitlines()
    assert script == str(venv.bin / "flopbudget")
    assert Path(module).is_relative_to(venv.path) and ROOT not in Path(module).parents
    assert distributions == "['pytest-flopbudget']"
    assert version == VERSION
    assert VERSION in printed


BUDGET_TESTS = """\
import pytest
import torch
from torch import nn


@pytest.mark.flop_budget("40")
def test_within(flopbudget):
    flopbudget.count(nn.Linear(8, 2), torch.randn(1, 8))  # 2*16 MAC FLOPs + 2 bias adds = 34


@pytest.mark.flop_budget("20")
def test_over(flopbudget):
    flopbudget.count(nn.Linear(8, 2), torch.randn(1, 8))
"""


def test_the_pytest_plugin_loads_from_the_wheel(venv: FreshVenv, tmp_path: Path) -> None:
    (tmp_path / "test_budgets.py").write_text(BUDGET_TESTS, encoding="utf-8")
    plugins = venv.sh("python -m pytest --version --version", cwd=tmp_path)
    assert re.search(rf"pytest-flopbudget-{re.escape(VERSION)} at {re.escape(str(venv.path))}/", plugins.stdout), (
        plugins.stdout + plugins.stderr
    )
    done = venv.sh("python -m pytest -p no:cacheprovider -q", cwd=tmp_path, COLUMNS="200")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed, 1 passed" in done.stdout
    assert "34 FLOPs > budget 20 FLOPs" in done.stdout


def readme_steps(venv: FreshVenv, project: Path, home: str) -> dict[str, str]:
    """Steps 2 to 4 of "Use it in your project" (step 1 made `venv`), as test_onboarding runs them on the checkout;
    what each command printed."""
    project.mkdir()
    assert venv.sh("git init -q -b main && git config user.email t@example.com && git config user.name t",
                   cwd=project).returncode == 0  # fmt: skip
    model = next(block for block in blocks("python") if block.startswith("# mypkg/model.py\n"))
    (project / "mypkg").mkdir()
    (project / "mypkg" / "__init__.py").write_text("")
    (project / "mypkg" / "model.py").write_text(model)
    git(project, "add", "mypkg")
    git(project, "commit", "-qm", "The model")
    hook = next(block for block in blocks("yaml") if block.startswith("# .pre-commit-config.yaml\n"))
    printed = {}
    for command in commands():
        if command.startswith("pip install"):
            continue  # step 1: the `venv` fixture ran it
        if command.startswith("pre-commit install"):
            (project / ".pre-commit-config.yaml").write_text(hook)
        done = venv.sh(command, cwd=project, PRE_COMMIT_HOME=home, COLUMNS="200")
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        printed[command] = done.stdout + done.stderr
    return printed


def test_the_readme_steps_and_the_action_against_the_wheel(venv: FreshVenv, tmp_path: Path) -> None:
    """Steps 2 to 5 of "Use it in your project" against the wheel: a pull request that widens the model fails."""
    project = tmp_path / "project"
    home = str(tmp_path / "pre-commit-home")
    printed = readme_steps(venv, project, home)
    count = next(out for command, out in printed.items() if command.startswith("flopbudget count"))
    assert "total: 11,237,082 FLOPs, 5,322,832 MACs, 618 params" in count
    assert "11,237,082 FLOPs, 5,322,832 MACs, 618 params" in readme_section()
    table = next(block for block in blocks("toml") if block.startswith("[tool.flopbudget.models."))
    assert (project / "pyproject.toml").read_text().endswith("\n" + table)
    hook_ran = next(out for command, out in printed.items() if "git add .pre-commit-config.yaml" in command)
    assert re.search(r"^flopbudget\.+Passed$", hook_ran, re.MULTILINE), hook_ran
    assert git(project, "status", "--porcelain") == ""

    # step 5: the action's steps on a pull request, the install step installing the wheel from its folder
    pull_request(project, "wider")
    model_file = project / "mypkg" / "model.py"
    model_file.write_text(
        model_file.read_text().replace("nn.Conv2d(3, 16", "nn.Conv2d(3, 32").replace("Linear(16", "Linear(32")
    )
    assert venv.sh("flopbudget check --update && git add -A && git commit -q --no-verify -m wider", cwd=project,
                   PRE_COMMIT_HOME=home).returncode == 0  # fmt: skip
    inputs = {"package": "pytest-flopbudget[torch]", "torch-index-url": ""}
    offline = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(venv.dist), "PYTHONPATH": ""}
    install = run_action_step("Install", project, inputs, path=[venv.bin], **offline)
    assert install.returncode == 0, install.stdout + install.stderr
    assert install.stdout.startswith("+ python -m pip install pytest-flopbudget\\[torch\\]\n"), install.stdout
    assert f"pytest-flopbudget[torch] in {venv.path}" in install.stdout  # the wheel the README's line installed
    assert install.stdout.splitlines()[-1] == f"flopbudget {VERSION} (pytest-flopbudget)"
    job = run_action_step("Check", project, inputs, path=[venv.bin], **offline)
    assert job.returncode == 1, job.stdout + job.stderr
    page = tmp_path / "runner-temp" / "flopbudget-diff.html"
    assert job.stdout.startswith(f"+ flopbudget check --base-ref origin/main --report pictures:{page}\n")
    assert page.is_file()  # the model grew: its differential picture, for the action to upload
    line = next(n for n, text in enumerate((project / "pyproject.toml").read_text().splitlines(), 1) if "flops" in text)
    assert f"::error file=pyproject.toml,line={line}," in job.stdout
    assert "1 of 1 model over budget" in (tmp_path / "step-summary.md").read_text()


# -- the "done when": a pull request that grows a model inside its budget ---------------------------------

TOWER = """\
from torch import nn


class Block(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.up = nn.Linear(width, hidden)
        self.act = nn.GELU()
        self.down = nn.Linear(hidden, width)

    def forward(self, x):
        return x + self.down(self.act(self.up(x)))


class Tower(nn.Module):
    def __init__(self, width=64, hidden=128, depth=4):
        super().__init__()
        self.blocks = nn.ModuleList(Block(width, hidden) for _ in range(depth))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def tower():
    return Tower()
"""


def test_a_pull_request_that_grows_inside_its_budget_warns_with_the_grouped_diff_in_summary_comment_and_exports(
    venv: FreshVenv, tmp_path: Path
) -> None:
    """The wheel installed the README's way, the README's steps, then a second model added on main with room to grow
    and `warn-increase = "1%"`; a pull request widens every block of it by 12.5%, inside its ceilings. The action's
    steps (trend exports on, `comment: true`) pass the job with a warning; the job summary and the comment's body
    say what the warning is, show the growth as one grouped row per repeated layer and link the differential
    picture, the comment step posts that body once, and the three trend exports parse."""
    project = tmp_path / "project"
    home = str(tmp_path / "pre-commit-home")
    readme_steps(venv, project, home)
    (project / "mypkg" / "tower.py").write_text(TOWER)
    added = venv.sh("flopbudget init mypkg.tower:tower --input 1,64 --headroom 30", cwd=project, COLUMNS="200")
    assert added.returncode == 0, added.stdout + added.stderr
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + 'warn-increase = "1%"\n')  # the tower's table is the last one
    done = venv.sh("flopbudget check --update && git add -A && git commit -qm 'A tower, with room to grow'",
                   cwd=project, PRE_COMMIT_HOME=home)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr

    pull_request(project, "wider-blocks")
    tower_file = project / "mypkg" / "tower.py"
    tower_file.write_text(tower_file.read_text().replace("hidden=128", "hidden=144"))
    done = venv.sh("flopbudget check --update && git add -A && git commit -qm 'Wider blocks'", cwd=project,
                   PRE_COMMIT_HOME=home)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr

    exports = tmp_path / "exports"
    runner_temp = tmp_path / "runner-temp"  # where run_action_step points RUNNER_TEMP
    reports = f"--report metrics:{exports}/metrics.txt --report benchmark:{exports}/benchmark.json"
    inputs = {
        "package": "pytest-flopbudget[torch]",
        "torch-index-url": "",
        "comment": "true",
        "args": f"{reports} --report bencher:{exports}/bencher.json",
    }
    offline = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(venv.dist), "PYTHONPATH": ""}
    install = run_action_step("Install", project, inputs, path=[venv.bin], **offline)
    assert install.returncode == 0, install.stdout + install.stderr
    job = run_action_step("Check", project, inputs, path=[venv.bin], **offline)
    assert job.returncode == 0, job.stdout + job.stderr

    # the warning: an annotation on the budget's table, nothing failed
    warnings = [line for line in job.stdout.splitlines() if line.startswith("::warning ")]
    (grew,) = [line for line in warnings if "grew more than warn-increase" in line]
    line = pyproject.read_text().splitlines().index('warn-increase = "1%"') + 1
    assert grew.startswith(f"::warning file=pyproject.toml,line={line},"), grew
    assert "largest MACs changes by layer: blocks.{0..3}.down x4 +4.10k (+12.5%25), blocks.{0..3}.up x4" in grew
    assert "::error" not in job.stdout
    # the differential picture: one page, the tower's section only, uploaded and linked (the upload is GitHub's)
    page = (runner_temp / "flopbudget-diff.html").read_text()
    assert re.findall(r"^<h2>(.*)</h2>$", page, flags=re.M) == ["tower (FLOPs)"]
    assert run_action_step("Find the differential pictures", project, inputs, path=[venv.bin]).returncode == 0
    found = step_outputs(project)
    assert found["models"] == "1"
    url = "https://github.com/o/r/actions/runs/1/artifacts/2"
    steps = {"pictures": found, "upload": {"artifact-url": url}}
    link = run_action_step("Link the differential pictures", project, inputs, path=[venv.bin], steps=steps)
    assert link.returncode == 0, link.stdout + link.stderr
    line = f"Differential pictures of the changed model: [flopbudget-diff.html]({url})"
    assert step_outputs(project) == {"line": line}  # the comment's footer

    # 4 blocks x (64*144 + 144*64) MACs = 73,728 now, 4 x (64*128 + 128*64) = 65,536 at the base: +12.5%
    summary = (tmp_path / "step-summary.md").read_text()
    body = (runner_temp / "flopbudget-comment.md").read_text()
    assert body.startswith(f"{MARKER}\n")
    for text in (summary, body):
        assert "+12.5%" in text and "more than warn-increase 1%" in text, text
        assert "blocks.{0..3}.up x4" in text and "blocks.{0..3}.down x4" in text, text
        assert "blocks.0.up" not in text  # grouped: no row per block
        assert "classifier" in text  # the unchanged model keeps its row
    assert summary.endswith(f"\n\n{line}\n")
    assert body.split("\n", 1)[1] + f"\n{line}\n" == summary  # the summary, and the link the footer adds below

    # the comment step, the wheel's poster against a fake GitHub: created once, the check's body and the link
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": NUMBER}}))
    fake = FakeGitHub()
    with serving(fake) as api:
        env = pull_request_env(str(event), api)
        step = "Comment on the pull request"
        posted = run_action_step(
            step, project, inputs, path=[venv.bin], steps={"link": {"line": line}}, **offline, **env
        )
    assert posted.returncode == 0 and "::notice" not in posted.stdout, posted.stdout + posted.stderr
    assert [method for method, _, _ in fake.requests] == ["GET", "POST"]
    assert [c["body"] for c in fake.comments if c["body"] != "LGTM"] == [f"{body.rstrip()}\n\n{line}\n"]

    metrics = parse_openmetrics((exports / "metrics.txt").read_text())
    macs = {model: int(value) for model, value in metrics["flopbudget_macs"].items()}
    assert macs == {"classifier": 5_322_832, "tower": 73_728}
    benchmark = json.loads((exports / "benchmark.json").read_text())
    validate_benchmark(benchmark)
    assert {entry["name"] for entry in benchmark} >= {"classifier - FLOPs", "tower - FLOPs"}
    bencher = json.loads((exports / "bencher.json").read_text())
    pytest.importorskip("jsonschema").validate(bencher, BENCHER_SCHEMA)
    assert bencher["tower"]["macs"]["value"] == 73_728
