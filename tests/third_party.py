"""A third party's package, really installed: a fresh venv that sees this environment (torch, pytest, this
repository) and a package built from a few files and pip-installed into it with its entry points.

The extension tests (a backend, a metric, an output from outside the package) install one and run
`count()`, `flopbudget check` and pytest with the venv's interpreter, so discovery goes through installed
distribution metadata exactly as a user's `pip install flopbudget-myframework` would.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import textwrap
import venv
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def third_party_venv(
    where: Path, name: str, modules: Mapping[str, str], entry_points: Mapping[str, Mapping[str, str]]
) -> Path:
    """Build `name` from `modules` (file name -> source) with `entry_points` (group -> name -> `module:attr`),
    pip-install it into a new venv at `where / "venv"` and return that venv's python."""
    source = where / f"{name}-src"
    source.mkdir(parents=True)
    for file, text in modules.items():
        (source / file).write_text(textwrap.dedent(text), encoding="utf-8")
    groups = "".join(
        f'\n[project.entry-points."{group}"]\n' + "".join(f'{key} = "{value}"\n' for key, value in names.items())
        for group, names in entry_points.items()
    )
    py_modules = ", ".join(f'"{Path(file).stem}"' for file in modules if file.endswith(".py"))
    (source / "pyproject.toml").write_text(
        f'[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "{name}"\nversion = "0.1"\n{groups}\n'
        f"[tool.setuptools]\npy-modules = [{py_modules}]\n",
        encoding="utf-8",
    )
    home = where / "venv"
    venv.EnvBuilder(with_pip=False).create(home)
    python = home / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # This environment's packages (torch, pytest, setuptools, this package's metadata) and the repository itself,
    # after the venv's own site-packages, so the third party's package is found first.
    outer = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "outer-environment.pth").write_text("\n".join([str(ROOT), *sorted(outer)]) + "\n", encoding="utf-8")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            str(source),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return python
