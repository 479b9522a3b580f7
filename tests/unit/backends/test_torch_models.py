"""What the PyTorch backend counts for a model entry: dtypes decided by the model (token ids), Hugging Face main
inputs, `.model` wrappers (Ultralytics' YOLO), `method = "decode"`, and 0-d inputs (a diffusion timestep)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_flopbudget._config.location import LocatedError
from pytest_flopbudget._config.pyproject import ModelEntry, load_settings

torch = pytest.importorskip("torch")

from pytest_flopbudget import count  # noqa: E402
from pytest_flopbudget._backends import count_entry  # noqa: E402
from pytest_flopbudget._backends.torch_models import build_inputs, load_model  # noqa: E402

MODELS = """\
import torch

CALLS = []

class Tokens(torch.nn.Module):
    '''An embedding of 10 x 4 then a 4 -> 3 linear: the input is token ids.'''
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, ids):
        return self.fc(self.emb(ids.reshape(-1, ids.shape[-1])))

class Positions(torch.nn.Module):
    '''Has an embedding, but its input is read by a linear first: features, not ids.'''
    def __init__(self):
        super().__init__()
        self.pos = torch.nn.Embedding(8, 4)
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x) + self.pos(torch.arange(x.shape[1], device=x.device))

class TwoTower(torch.nn.Module):
    '''Token ids and float features side by side.'''
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, features, ids):
        return self.fc(features) + self.emb(ids)

class Autoencoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Linear(8, 2)
        self.decoder = torch.nn.Linear(2, 8)
        self.decoded = 0

    def forward(self, x):
        return self.decode(self.encode(x))

    def encode(self, x):
        return self.encoder(x)

    def decode(self, z):
        self.decoded += 1  # forward writes state: it must land on the count's copy
        CALLS.append(id(self))
        return self.decoder(z)

class YOLO:
    '''Ultralytics' YOLO in miniature: not a module, its network in .model, and __call__ would run predict.'''
    def __init__(self):
        self.model = torch.nn.Sequential(torch.nn.Conv2d(3, 2, 1))

    def __call__(self, *args):
        raise AssertionError("predict must not run")

class Holder:
    model = "not a module"

def yolo():
    return YOLO()

yolo_instance = YOLO()

def holder():
    return Holder()
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    package = tmp_path / f"fbent_{tmp_path.name}"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "models.py").write_text(MODELS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", list(sys.path))
    return tmp_path


def entry_for(project: Path, **toml: str) -> ModelEntry:
    body = "\n".join(f"{k} = {v}" for k, v in toml.items()).replace("PKG", f"fbent_{project.name}")
    (project / "pyproject.toml").write_text(f"[tool.flopbudget.models.m]\n{body}\nflops = '1G'\n")
    return load_settings(project / "pyproject.toml").models["m"]


def located(project: Path, entry: ModelEntry) -> str:
    with pytest.raises(LocatedError) as info:
        count_entry(entry, project)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return message


# -- token ids by default --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("execution", ["fake", "real"])
@pytest.mark.parametrize("inputs", ["[[2, 5]]", "[{ shape = [2, 5] }]", "{ ids = [2, 5] }"])
def test_an_input_that_feeds_an_embedding_is_int64_token_ids(project: Path, inputs: str, execution: str) -> None:
    entry = entry_for(project, target='"PKG.models:Tokens"', inputs=inputs, execution=f'"{execution}"')
    report = count_entry(entry, project)
    assert [item["dtype"] for item in report.inputs] == ["int64"]
    # linear 4 -> 3 on 10 rows: 2*10*4*3 = 240 + 30 bias adds; the lookup is free. params 10*4 + 4*3 + 3 = 55
    assert (report.flops, report.macs, report.params) == (270, 120, 55)
    explicit = entry_for(
        project,
        target='"PKG.models:Tokens"',
        inputs='[{ shape = [2, 5], dtype = "int64" }]',
        execution=f'"{execution}"',
    )
    assert count_entry(explicit, project).to_dict() == report.to_dict()


def test_an_input_read_by_arithmetic_first_stays_float(project: Path) -> None:
    report = count_entry(entry_for(project, target='"PKG.models:Positions"', inputs="[[1, 8, 4]]"), project)
    assert report.inputs == [{"shape": [1, 8, 4], "dtype": "float32"}]
    # linear 2*8*4*4 = 256 + 32 bias, + 32 for adding the position embeddings
    assert report.flops == 320


def test_each_input_is_decided_by_its_own_first_reader(project: Path) -> None:
    report = count_entry(entry_for(project, target='"PKG.models:TwoTower"', inputs="[[3, 4], [3]]"), project)
    assert [item["dtype"] for item in report.inputs] == ["float32", "int64"]


def test_a_given_dtype_always_wins(project: Path) -> None:
    from pytest_flopbudget._errors import CountingError

    entry = entry_for(project, target='"PKG.models:Tokens"', inputs='[{ shape = [2, 5], dtype = "float32" }]')
    with pytest.raises(CountingError, match=r"the model raised in layer 'emb' \(Embedding\)"):
        count_entry(entry, project)


def test_a_model_without_an_embedding_is_not_run_to_decide(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_flopbudget._counting.torch import input_roles

    monkeypatch.setattr(input_roles, "_FirstReader", None)  # would raise if the probe ran
    entry = entry_for(project, target='"PKG.models:yolo"', inputs="[[1, 3, 4, 4]]")
    assert build_inputs(entry, project, load_model(entry, project))[0][0].dtype == torch.float32


# -- .model wrappers (Ultralytics YOLO) ------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ['"PKG.models:yolo"', '"PKG.models:yolo_instance"'])
def test_an_object_holding_its_module_in_model_is_unwrapped(project: Path, target: str) -> None:
    report = count_entry(entry_for(project, target=target, inputs="[[1, 3, 4, 4]]"), project)
    # Conv2d(3, 2, 1) on 4x4: 16*2 outputs * 3 taps = 96 MACs; FLOPs 192 + 32 bias; params 3*2 + 2 = 8
    assert (report.flops, report.macs, report.params, report.model) == (224, 96, 8, "Sequential")


def test_an_object_whose_model_is_not_a_module_is_named_in_the_error(project: Path) -> None:
    message = located(project, entry_for(project, target='"PKG.models:holder"', inputs="[[1]]"))
    assert message.endswith(
        "tool.flopbudget.models.m.target: fbent_"
        f"{project.name}.models:holder() returned a Holder, not a torch.nn.Module (or an object whose .model is "
        "one, as Ultralytics' YOLO)"
    )


# -- method ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("execution", ["fake", "real"])
def test_method_counts_that_method_on_the_copy(project: Path, execution: str) -> None:
    entry = entry_for(
        project, target='"PKG.models:Autoencoder"', inputs="[[5, 2]]", method='"decode"', execution=f'"{execution}"'
    )
    model = load_model(entry, project)
    models = sys.modules[f"fbent_{project.name}.models"]
    report = count_entry(entry, project)
    # decoder 2 -> 8 on 5 rows: 2*5*2*8 = 160 + 40 bias; the encoder does not run; params are the whole model's
    assert (report.flops, report.macs, report.params) == (200, 80, 2 * 8 + 8 + 8 * 2 + 2)
    assert report.layers["decoder"].flops == 200
    assert "encoder" not in report.layers or report.layers["encoder"].flops == 0
    assert report.model == "Autoencoder.decode"
    assert models.CALLS and id(model) not in models.CALLS  # ran on the copy
    assert model.decoded == 0


def test_the_default_method_is_forward(project: Path) -> None:
    report = count_entry(entry_for(project, target='"PKG.models:Autoencoder"', inputs="[[5, 8]]"), project)
    assert report.flops == 2 * 5 * 8 * 2 + 10 + 200 and report.model == "Autoencoder"


def test_an_unknown_method_names_the_key(project: Path) -> None:
    entry = entry_for(project, target='"PKG.models:Autoencoder"', inputs="[[5, 2]]", method='"decod"')
    message = located(project, entry)
    assert "pyproject.toml:4: tool.flopbudget.models.m.method: Autoencoder has no method 'decod'" in message
    assert "its own methods: decode, encode" in message


def test_count_takes_method_too() -> None:
    model = torch.nn.Transformer(
        d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=8, batch_first=True
    )
    encoded = count(model.eval(), torch.zeros(1, 3, 8), method="encoder")
    assert encoded.flops == count(model.encoder, torch.zeros(1, 3, 8)).flops > 0


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ({"method": "3"}, 'tool.flopbudget.models.m.method: expected a method name such as "decode", got 3'),
        ({"method": '"de code"'}, 'tool.flopbudget.models.m.method: expected a method name such as "decode"'),
        (
            {"target": '"m.onnx"', "inputs": "{ x = [1] }", "method": '"decode"'},
            "tool.flopbudget.models.m.method: method applies to PyTorch targets only, not to ONNX files",
        ),
    ],
)
def test_method_is_checked_with_the_configuration(project: Path, toml: dict[str, str], message: str) -> None:
    with pytest.raises(LocatedError, match=None) as info:
        entry_for(project, **{"target": '"PKG.models:Autoencoder"', "inputs": "[[1, 2]]", **toml})
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_scalar_shape_is_a_0d_input(project: Path) -> None:
    entry = entry_for(project, target='"PKG.models:Autoencoder"', inputs='{ x = { shape = [], dtype = "int64" } }')
    _, kwargs = build_inputs(entry, project)
    assert kwargs["x"].shape == () and kwargs["x"].dtype == torch.int64
