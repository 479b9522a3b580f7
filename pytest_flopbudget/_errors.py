"""Errors that reach users as one line.

Every failure caused by the user's input (a model, a shape, a config key, a budget string) is raised as a
`FlopBudgetError` whose message names what to change. Front ends print `str(error)` and never a traceback, so the
message must stand on its own.
"""

from __future__ import annotations


class FlopBudgetError(Exception):
    """A problem with what the user gave us, phrased so they can fix it."""


class CountingError(FlopBudgetError):
    """The model could not be counted (it raised, or the tracing machinery could not run it)."""


class ConfigError(FlopBudgetError):
    """`[tool.flopbudget]`, a marker argument or a budget string is malformed."""


class BaselineError(FlopBudgetError):
    """A baseline file is unreadable, corrupt or was written by something else."""


class FlopBudgetWarning(UserWarning):
    """A budget that cannot be checked as written (e.g. a model counted in a test with no budget): public at the
    package root, so `-W error::pytest_flopbudget.FlopBudgetWarning` turns it into an error."""


class MissingInputSizes(CountingError):
    """A model file's graph inputs have dims of unknown size that no given input fixes. The message advises the
    Python call (`count('m.onnx', inputs={'x': [<batch>, 3]})`); a front end with other words for the same advice
    (`--input x=<batch>,3`) phrases it from the fields, `missing` (each input with its dims, `<name>` where a size
    must be given) and `model` (what the call names)."""

    def __init__(self, label: str, graph_inputs: str, missing: list[tuple[str, list[str]]], model: str) -> None:
        self.label = label
        self.graph_inputs = graph_inputs
        self.missing = missing
        self.model = model
        super().__init__(self.phrased(self.python_hint))

    @property
    def python_hint(self) -> str:
        template = ", ".join(f"'{name}': [{', '.join(dims)}]" for name, dims in self.missing)
        return f"count({self.model!r}, inputs={{{template}}})"

    @property
    def command_line_hint(self) -> str:
        return " ".join(f"--input {name}={','.join(dims).replace(' ', '')}" for name, dims in self.missing)

    def phrased(self, hint: str) -> str:
        return (
            f"{self.label}: the sizes of some input dimensions are not known; graph inputs: {self.graph_inputs}; "
            f"give them as {hint} with each <...> replaced by a size"
        )

    @staticmethod
    def behind(error: BaseException) -> MissingInputSizes | None:
        """The `MissingInputSizes` that `error` is, or that it was raised while handling (a front end or backend
        that adds the model's location raises its own `CountingError` from it)."""
        seen: BaseException | None = error
        while seen is not None:
            if isinstance(seen, MissingInputSizes):
                return seen
            seen = seen.__cause__ or seen.__context__
        return None
