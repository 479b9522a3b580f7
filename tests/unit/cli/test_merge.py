"""`flopbudget check --shard K/N` and `flopbudget merge`: the shards of a run judged as that run, and refused
(naming the model) when they are not parts of one; several projects in one run (`--pyproject` repeated)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from main_in_process import one_error_line, run_main  # noqa: E402

#: Six MLPs of different sizes (so the shards' weights differ); `grow` adds a layer to two of them.
MODELS = """\
from torch import nn

SHAPES = {"a": (8, 1), "b": (8, 2), "c": (16, 3), "d": (16, 4), "e": (4, 5), "f": (32, 1)}


def mlp(width, depth):
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers)


def __getattr__(name):
    if name in SHAPES:
        return lambda: mlp(*SHAPES[name])
    raise AttributeError(name)
"""
NAMES = "abcdef"
WIDTHS = {"a": 8, "b": 8, "c": 16, "d": 16, "e": 4, "f": 32}
#: Every file output; the terminal text is compared too.
OUTPUTS = ("json", "markdown", "gitlab", "metrics", "benchmark", "bencher", "comment", "pictures")


def pyproject(module: str, names: str = NAMES) -> str:
    tables = [
        f'[tool.flopbudget.models.{n}]\ntarget = "{module}:{n}"\ninputs = [[1, {WIDTHS[n]}]]\nflops = "3k"\n'
        for n in names
    ]
    return "[tool.flopbudget]\n\n" + "\n".join(tables)


class Project:
    def __init__(self, root: Path, module: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.root, self.module, self.capsys = root, module, capsys

    def run(self, *argv: str) -> tuple[int, str, str]:
        return run_main(argv, self.root, self.capsys)

    def grow(self, module: Path | None = None) -> None:
        path = module or self.root / f"{self.module}.py"
        path.write_text(path.read_text().replace('"b": (8, 2)', '"b": (8, 3)').replace('"f": (32, 1)', '"f": (32, 2)'))

    def reports(self, folder: str) -> list[str]:
        return [arg for kind in OUTPUTS for arg in ("--report", f"{kind}:{folder}/{kind}")]

    def written(self, folder: str) -> dict[str, str]:
        return {path.name: path.read_text(encoding="utf-8") for path in sorted((self.root / folder).iterdir())}


@pytest.fixture
def project(tmp_path, monkeypatch, capsys, request) -> Project:
    module = "shard_models_" + "".join(c if c.isalnum() else "_" for c in request.node.name)[:40]
    root = tmp_path / "demo"
    root.mkdir()
    (root / f"{module}.py").write_text(MODELS)
    (root / "pyproject.toml").write_text(pyproject(module))
    monkeypatch.chdir(root)
    made = Project(root, module, capsys)
    assert made.run("check", "--update")[0] == 0
    made.grow()  # b and f grow; f over its budget
    return made


def shards(project: Project, total: int = 3, *extra: str) -> list[str]:
    paths = []
    for index in range(1, total + 1):
        path = f"shard-{index}.json"
        code, _, err = project.run("check", "--shard", f"{index}/{total}", "--report", f"json:{path}", *extra)
        assert code in (0, 1), err
        paths.append(path)
    return paths


def test_the_merged_shards_write_what_the_whole_run_writes(project: Project) -> None:
    whole = project.run("check", *project.reports("whole"))
    paths = shards(project)
    parts = [json.loads((project.root / path).read_text())["shard"]["part"] for path in paths]
    assert sorted(nodeid for part in parts for nodeid in part) == [f"pyproject.toml::{n}" for n in NAMES]
    assert all(parts), parts  # six models of different weights: none of the three shards is empty
    merged = project.run("merge", *paths, *project.reports("merged"))
    assert whole[0] == merged[0] == 1  # f is over its budget
    assert merged[1:] == whole[1:]  # the terminal text, stdout and stderr
    assert project.written("merged") == project.written("whole")
    assert "f: " in whole[1] and "pictures" in project.written("whole")


def test_a_shard_writes_no_github_output_and_the_merge_writes_it_once(project: Project, monkeypatch) -> None:
    summary = project.root / "summary.md"
    summary.touch()
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    paths = shards(project, 2)
    assert summary.read_text() == ""
    code, out, _ = project.run("merge", *paths)
    assert code == 1
    assert out.count("::error file=pyproject.toml") == 1 and summary.read_text().startswith("### flopbudget: ❌")


def test_a_shard_whose_results_are_missing_names_its_models_in_every_output(project: Project) -> None:
    paths = shards(project)
    plan = json.loads((project.root / paths[2]).read_text())["shard"]
    lost = sorted(nodeid.split("::")[1] for nodeid in plan["part"])
    code, out, err = project.run("merge", paths[0], paths[1], "--report", "json:merged.json")
    assert code == 2
    document = json.loads((project.root / "merged.json").read_text())
    assert sorted(u["name"] for u in document["unchecked"]) == lost
    assert (
        f"{lost[0]} (pyproject.toml::{lost[0]}): in no shard's results: the results of shard 3/3 were not given" in err
    )
    assert f"not checked: {', '.join(lost)}" in out


def test_a_file_that_is_not_there_is_named_and_its_models_are_missing(project: Project) -> None:
    paths = shards(project, 2)
    code, _, err = project.run("merge", paths[0], "gone.json")
    assert code == 2
    assert "flopbudget: error: merge: gone.json: no such file (did that shard finish?)" in err
    assert "in no shard's results: the results of shard 2/2 were not given or could not be read" in err


def test_a_model_counted_by_two_shards_is_refused_naming_it(project: Project) -> None:
    paths = shards(project, 2)
    shutil.copy(project.root / paths[0], project.root / "again.json")
    part = json.loads((project.root / paths[0]).read_text())["shard"]["part"]
    code, out, err = project.run("merge", *paths, "again.json", "--report", "json:merged.json")
    assert code == 2 and out == "" and not (project.root / "merged.json").exists()
    name = part[0].split("::")[1]
    assert (
        f"flopbudget: error: merge: model {name!r} ({part[0]}) is counted twice: by shard 1/2 (shard-1.json) and by "
        "shard 1/2 (again.json)"
    ) in err.splitlines()


def test_shards_that_saw_different_baselines_or_configurations_are_refused(project: Project) -> None:
    first = shards(project, 2)[0]
    (project.root / ".flopbudget" / "c.json").write_text((project.root / ".flopbudget" / "a.json").read_text())
    (project.root / "pyproject.toml").write_text((project.root / "pyproject.toml").read_text() + "\n# edited\n")
    project.run("check", "--shard", "2/2", "--report", "json:other.json")
    code, out, err = project.run("merge", first, "other.json")
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert (
        "flopbudget: error: merge: shard 1/2 (shard-1.json) and shard 2/2 (other.json) saw different baselines: "
        ".flopbudget/c.json (model 'c') differs"
    ) in lines
    assert any("saw different configurations: pyproject.toml is 'sha256:" in line for line in lines)


def test_shards_of_runs_split_differently_or_with_other_options_are_refused(project: Project) -> None:
    two, three = shards(project, 2)[0], "three.json"
    project.run("check", "--shard", "2/3", "--report", f"json:{three}")
    code, _, err = project.run("merge", two, three)
    assert code == 2 and "are shards of runs split 2 and 3 ways" in err
    project.run("check", "--shard", "2/2", "--require-baseline", "--report", "json:strict.json")
    code, _, err = project.run("merge", two, "strict.json")
    assert code == 2 and "saw different configurations: require-baseline is 'false' and 'true'" in err


def test_results_a_merge_cannot_use_are_refused_in_one_line(project: Project) -> None:
    assert project.run("check", "--report", "json:whole.json")[0] == 1
    (project.root / "broken.json").write_text("{")
    code, _, err = project.run("merge", "whole.json", "broken.json")
    assert code == 2
    assert one_error_line(err) == (
        "flopbudget: error: merge: no shard's results could be read: whole.json: not a shard's results (no `shard` "
        "object): write them with flopbudget check --shard K/N --report json:PATH, or pytest --flopbudget-shard K/N "
        "--flopbudget-report json:PATH; broken.json: cannot read it: not JSON (Expecting property name enclosed in "
        "double quotes at line 1)"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--shard", "1/2"], "--shard 1/2: the shard's results go nowhere: add --report json:PATH (or --format json)"),
        (["--shard", "1/2", "--update", "--report", "json:x"], "--shard with --update: record baselines in one run"),
        (["--shard", "3/2", "--report", "json:x"], "--shard '3/2': expected K/N"),
        (["--shard", "auto", "--report", "json:x"], "--shard auto: no shard index and total in the environment"),
    ],
)
def test_a_shard_it_cannot_run_is_one_line_before_anything_is_counted(project: Project, argv, message) -> None:
    code, out, err = project.run("check", *argv)
    assert code == 2 and out == ""
    assert one_error_line(err).startswith(f"flopbudget: error: {message}")


def test_shard_auto_reads_gitlabs_parallel_jobs(project: Project, monkeypatch) -> None:
    monkeypatch.setenv("CI_NODE_INDEX", "2")
    monkeypatch.setenv("CI_NODE_TOTAL", "2")
    project.run("check", "--shard", "auto", "--report", "json:auto.json")
    assert json.loads((project.root / "auto.json").read_text())["shard"]["index"] == 2


def test_format_json_is_a_shards_results_too(project: Project) -> None:
    code, out, _ = project.run("check", "--shard", "1/1", "--format", "json")
    document = json.loads(out)
    assert document["shard"]["total"] == 1 and len(document["models"]) == len(NAMES)
    (project.root / "one.json").write_text(out)
    assert project.run("merge", "one.json")[0] == code == 1


# -- several projects in one run -------------------------------------------------------------------------------------


@pytest.fixture
def monorepo(project: Project) -> Project:
    """packages/a with models a, b, c and packages/b with d, e, f and a second `a`: names that repeat."""
    for package, names in (("a", "abc"), ("b", "defa")):
        folder = project.root / "packages" / package
        folder.mkdir(parents=True)
        module = f"{project.module}_{package}"
        (folder / f"{module}.py").write_text(MODELS)
        (folder / "pyproject.toml").write_text(pyproject(module, names))
    code, _, err = project.run(*monorepo_check("--update"))
    assert code == 0, err
    for package in "ab":
        project.grow(project.root / "packages" / package / f"{project.module}_{package}.py")
    return project


def monorepo_check(*argv: str) -> list[str]:
    return ["check", "--pyproject", "packages/a/pyproject.toml", "--pyproject", "packages/b/pyproject.toml", *argv]


def test_several_projects_are_one_run_with_a_section_each(monorepo: Project) -> None:
    code, out, _ = monorepo.run(*monorepo_check("--report", "markdown:summary.md", "--report", "json:r.json"))
    assert code == 1  # f, in packages/b, is over its budget; b grew in packages/a within it
    assert out.index("== packages/a/pyproject.toml ==") < out.index("== packages/b/pyproject.toml ==")
    assert "then run `flopbudget check --pyproject packages/b/pyproject.toml --update f` and commit both" in out
    summary = (monorepo.root / "summary.md").read_text(encoding="utf-8")
    headings = [line for line in summary.splitlines() if line.startswith("#")]
    assert headings == [
        "### flopbudget: ❌ 1 of 7 models over budget, 1 with warnings",
        "#### packages/a/pyproject.toml: ✅ 3 models within budget, 1 with warnings",
        "#### packages/b/pyproject.toml: ❌ 1 of 4 models over budget",
    ]
    document = json.loads((monorepo.root / "r.json").read_text())
    assert [(m["name"], m["nodeid"]) for m in document["models"]][:2] == [
        ("a", "a/pyproject.toml::a"), ("a", "b/pyproject.toml::a"),
    ]  # fmt: skip
    assert [p["pyproject"] for p in document["run"]["projects"]] == [
        "packages/a/pyproject.toml", "packages/b/pyproject.toml",
    ]  # fmt: skip


def test_several_projects_shard_and_merge_as_one(monorepo: Project) -> None:
    whole = monorepo.run(*monorepo_check(*monorepo.reports("whole")))
    paths = []
    for index in (1, 2):
        path = f"m{index}.json"
        monorepo.run(*monorepo_check("--shard", f"{index}/2", "--report", f"json:{path}"))
        paths.append(path)
    parts = [json.loads((monorepo.root / p).read_text())["shard"]["part"] for p in paths]
    assert sorted(n for part in parts for n in part) == sorted(
        [f"a/pyproject.toml::{n}" for n in "abc"] + [f"b/pyproject.toml::{n}" for n in "defa"]
    )
    merged = monorepo.run("merge", *paths, *monorepo.reports("merged"))
    assert merged == whole
    assert monorepo.written("merged") == monorepo.written("whole")


def test_a_project_given_twice_or_a_name_in_none_is_one_line(monorepo: Project) -> None:
    code, _, err = monorepo.run(
        "check", "--pyproject", "packages/a/pyproject.toml", "--pyproject", "packages/a/pyproject.toml"
    )
    assert code == 2 and "the same file as --pyproject packages/a/pyproject.toml" in one_error_line(err)
    code, _, err = monorepo.run(*monorepo_check("zz"))
    assert code == 2 and one_error_line(err).startswith("flopbudget: error: in none of the projects: no model 'zz'")
