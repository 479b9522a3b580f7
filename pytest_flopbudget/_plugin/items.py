"""pyproject models as test items: `[tool.flopbudget.models.NAME]` runs as `pyproject.toml::NAME`, like any test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_flopbudget._config.pyproject import ModelEntry
from pytest_flopbudget._plugin.failures import Failure
from pytest_flopbudget._plugin.state import SESSION
from pytest_flopbudget._safe_text import one_line, safe_text


class ModelsFile(pytest.File):
    """pyproject.toml as a collector: one item per `[tool.flopbudget.models.NAME]`."""

    def collect(self) -> Any:
        session = self.config.stash[SESSION]
        for name, entry in session.settings.models.items():
            # control characters in a pyproject key would reach every line pytest prints with the node id
            yield ModelItem.from_parent(self, name=one_line(name), entry=entry)


class ModelItem(pytest.Item):
    """Counts one pyproject model and checks its budget, like any other test."""

    def __init__(self, *, entry: ModelEntry, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.entry = entry
        self.extra_keyword_matches.add("flopbudget")

    def runtest(self) -> None:
        self.config.stash[SESSION].run_model(self)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, Failure):
            return safe_text(excinfo.value.reason)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        line = self.entry.source.line
        return self.path, (line - 1 if line else None), f"flopbudget model {self.name}"
