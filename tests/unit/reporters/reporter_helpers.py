"""The pyproject.toml texts the reporter tests judge, built from shared model tables.

A plain module (not a conftest): pytest's prepend import mode puts this directory on sys.path, so the test files
beside it import it directly.
"""

from __future__ import annotations

#: `flops = "1k"` on a model called resnet; the tests rely on this exact line (and its line number).
RESNET = """\
[tool.flopbudget.models.resnet]
target = "pkg:resnet"
inputs = [[1, 8]]
flops = "1k"
"""

VIT = """\
[tool.flopbudget.models.vit]
target = "pkg:vit"
inputs = [[1, 8]]
flops = "2k"
max-skipped-ops = 5
"""


def pyproject(*models: str) -> str:
    """A pyproject.toml with an empty [tool.flopbudget] table and then the given model tables, a blank line apart."""
    return "\n".join(["[tool.flopbudget]\n", *models])


#: resnet with a parameter ceiling as well.
RESNET_PARAMS = RESNET + "params = 10\n"

#: resnet (with a parameter ceiling) and vit (with a skipped-ops ceiling): the GitHub and GitLab tests.
TWO_MODELS = pyproject(RESNET_PARAMS, VIT)
