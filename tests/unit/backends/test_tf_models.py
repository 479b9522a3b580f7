"""The two TensorFlow backends: `tensorflow` (Keras models on TensorFlow, `tf.function`s and ConcreteFunctions,
functions given TensorFlow tensors or specs; `package.module:factory` targets chosen by the object) and
`savedmodel` (SavedModel directories, found by their `saved_model.pb`, counted without reading the variables).
Inputs as TensorSpecs, unknown dims bound by name and never dropped, refusals in one line, formulas for TensorFlow
ops, and no tensorflow import for a PyTorch model."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pytest_flopbudget._config.location import LocatedError
from pytest_flopbudget._config.pyproject import ModelEntry, load_settings
from pytest_flopbudget._errors import CountingError, MissingInputSizes

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
if keras.backend.backend() != "tensorflow":
    pytest.skip("Keras runs on another backend in this process", allow_module_level=True)

import numpy as np  # noqa: E402

from pytest_flopbudget import count, register_formula  # noqa: E402
from pytest_flopbudget._backends import count_entry  # noqa: E402
from pytest_flopbudget._backends.dispatch import backend_for_call, backend_for_model, load_entry  # noqa: E402
from pytest_flopbudget._backends.saved_models import SavedModels  # noqa: E402
from pytest_flopbudget._backends.tensorflow_models import TensorflowModels  # noqa: E402

TF = TensorflowModels()
SAVED = SavedModels()
X = np.zeros((25, 16), np.float32)

MODELS = """\
import keras
import tensorflow as tf


def dense():
    return keras.Sequential([keras.Input((16,), name="x"), keras.layers.Dense(9, name="dense")])


def tokens():
    return keras.Sequential([keras.Input((5,), dtype="int32"), keras.layers.Embedding(10, 4, name="emb"),
                             keras.layers.Dense(3, use_bias=False, name="fc")])


def two_inputs():
    a, b = keras.Input((4,), name="a"), keras.Input((6,), name="b")
    out = keras.layers.Dense(3, use_bias=False, name="fc")(keras.layers.Concatenate(name="cat")([a, b]))
    return keras.Model({"a": a, "b": b}, out)


@tf.function
def scores(q, k):
    return tf.matmul(q, k, transpose_b=True)


def self_scores():
    x = keras.Input((None, 8), name="x")
    h = keras.layers.Dense(8, name="proj")(x)
    products = keras.layers.Lambda(lambda h: keras.ops.matmul(h, keras.ops.transpose(h, (0, 2, 1))), name="scores")
    return keras.Model(x, products(h))


def not_a_model():
    return 42
"""


def dense() -> Any:
    # Dense(9) with a bias, on [25, 16] inputs named x
    return keras.Sequential([keras.Input((16,), name="x"), keras.layers.Dense(9, name="dense")])


def entry_for(root: Path, target: str, inputs: str, extra: str = "") -> ModelEntry:
    (root / "tfmodels.py").write_text(MODELS)
    (root / "pyproject.toml").write_text(
        f'[tool.flopbudget.models.m]\ntarget = "{target}"\ninputs = {inputs}\nflops = "1G"\n{extra}'
    )
    sys.modules.pop("tfmodels", None)
    return load_settings(root / "pyproject.toml").models["m"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`dense()` exported as a SavedModel (its serving signature takes x = [?, 16])."""
    where = tmp_path_factory.mktemp("saved") / "dense_sm"
    dense().export(str(where), verbose=False)
    return where


# -- what each backend takes -------------------------------------------------------------------------------------


def test_accepts_keras_models_tf_functions_and_functions_given_tensorflow_values() -> None:
    fn = tf.function(lambda x: x)
    assert TF.accepts_model(dense())
    assert TF.accepts_model(fn)
    assert TF.accepts_model(fn.get_concrete_function(tf.TensorSpec([2])))
    assert not TF.accepts_model(lambda x: x)  # a plain function says nothing until its arguments do
    assert TF.accepts_call(lambda x: x, (tf.TensorSpec([2]),), {})
    assert TF.accepts_call(lambda x: x, (), {"x": tf.zeros(3)})
    assert not TF.accepts_call(lambda x: x, (np.zeros(3),), {})  # an array alone is anybody's
    assert not TF.accepts_model("pkg.mod:factory")
    backend = backend_for_call(lambda x: x, (tf.TensorSpec([2]),), {})
    assert backend is not None and backend.name == "tensorflow"


def test_a_saved_model_directory_is_the_savedmodel_backends(exported: Path, tmp_path: Path) -> None:
    for model in (str(exported), exported):
        backend = backend_for_model(model)
        assert backend is not None and backend.name == "savedmodel", model
    assert SAVED.accepts(str(exported))
    assert not SAVED.accepts(str(tmp_path))  # a directory without saved_model.pb
    assert SAVED.input_names(str(exported)) == ["x"]


@pytest.mark.slow  # a process that imports torch and keras
def test_keras_on_the_torch_backend_stays_pytorchs(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    script = textwrap.dedent(
        """
        import os
        os.environ["KERAS_BACKEND"] = "torch"
        import sys
        import keras
        import torch
        from pytest_flopbudget import count
        from pytest_flopbudget._backends.dispatch import backend_for_model

        model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(9, name="dense")])
        print(backend_for_model(model).name, count(model, torch.zeros(25, 16)).flops)
        print("tensorflow" in sys.modules)
        """
    )
    env = {key: value for key, value in os.environ.items() if key != "KERAS_BACKEND"}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=tmp_path, env=env
    )
    # the same Dense(9) on [25, 16]: 2*25*9*16 + 25*9 = 7425, counted by the PyTorch backend
    assert result.stdout.split("\n")[0] == "torch 7425"


# -- counting through the public count() -------------------------------------------------------------------------


def test_the_founding_cases() -> None:
    # a 1x1 Conv2D, one filter, no bias, on a 1x1x1 input: one output element, one input channel, one tap:
    # 1 MAC = 2 FLOPs; 1 weight
    conv = keras.Sequential([keras.Input((1, 1, 1)), keras.layers.Conv2D(1, 1, use_bias=False, name="conv")])
    report = count(conv, np.zeros((1, 1, 1, 1), np.float32))
    assert (report.flops, report.macs, report.params, report.backend) == (2, 1, 1, "tensorflow")
    # Dense(9) with a bias on 25x16: 2*25*9*16 = 7200 for the matmul + 25*9 = 225 for the bias; 16*9 + 9 = 153
    report = count(dense(), X)
    assert (report.flops, report.macs, report.params) == (7425, 3600, 153)
    assert report.layers["dense"].flops == 7425


def test_training_counts_forward_and_the_tapes_backward() -> None:
    report = count(dense(), X, training=True)
    # forward: 7425 and the loss's sum over 25*9 = 225 outputs; backward: dW = xᵀ·dy, 2*16*9*25 = 7200, and the
    # bias gradient sums dy, 225 (the input gets no gradient)
    assert (report.forward.flops, report.backward.flops) == (7425 + 225, 7200 + 225)
    assert report.training


def test_unknown_dims_are_bound_by_name_never_dropped() -> None:
    w = tf.Variable(tf.zeros((16, 9)), name="w")

    @tf.function(input_signature=[tf.TensorSpec([None, 16], name="x")])
    def project(x: Any) -> Any:
        with tf.name_scope("proj"):
            return tf.matmul(x, w)

    # 2*25*9*16 = 7200; the captured variable is the function's 16*9 = 144 params, charged where it is read
    report = count(project, inputs={"x": [25, 16]})
    assert (report.flops, report.params) == (7200, 144)
    assert (report.layers["proj"].flops, report.layers["proj"].params) == (7200, 144)
    # the same through its ConcreteFunction (traced with an unknown batch, rebuilt with the bound one)
    assert count(project.get_concrete_function(), inputs={"x": [25, 16]}).flops == 7200
    # and through a spec whose batch is unknown, named by the parameter
    assert count(lambda x: tf.matmul(x, w), tf.TensorSpec([None, 16]), inputs={"x": [25, 16]}).flops == 7200
    with pytest.raises(CountingError) as info:
        count(project)
    assert str(info.value) == (
        "project: input 'x' has unknown dims [?, 16]; bind them with inputs={'x': [...]}, or give an array or a fully "
        "shaped tf.TensorSpec"
    )
    with pytest.raises(CountingError, match=r"inputs\['x'\] = \[25, 15\] does not fit its spec's \(None, 16\)"):
        count(project, inputs={"x": [25, 15]})
    with pytest.raises(CountingError, match=r"inputs= names 'y', which no tf\.TensorSpec argument is named"):
        count(project, inputs={"y": [25, 16]})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"method": "decode"}, "method=: not for a TensorFlow model"),
        ({"execution": "real"}, "execution=: not for a TensorFlow model"),
        ({"loss_fn": lambda out: out}, "loss_fn=: not for a TensorFlow model"),
        ({"generate": 2}, "generate=N (N >= 1) counts a PyTorch model's inference"),
    ],
)
def test_count_refuses_what_it_does_not_honour(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(CountingError) as info:
        count(dense(), X, **kwargs)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_formula_for_a_tensorflow_op() -> None:
    def inverse(m: Any) -> Any:
        return tf.linalg.inv(m)

    spec = tf.TensorSpec([4, 4])
    before = count(inverse, spec)
    assert before.flops == 0 and "MatrixInverse" in before.skipped
    with register_formula("MatrixInverse", lambda op: (op.in_shapes[0][0] ** 3, 0), backend="tensorflow"):
        after = count(inverse, spec)
    assert after.flops == 64 and not after.skipped  # n**3 = 4**3
    with pytest.raises(ValueError, match="is not a TensorFlow op type"):
        register_formula("tf.linalg.inv", lambda op: (0, 0), backend="tensorflow")
    with pytest.raises(TypeError, match="a TensorFlow op is named by its op type"):
        register_formula(42, lambda op: (0, 0), backend="savedmodel")


# -- pyproject targets -------------------------------------------------------------------------------------------


def test_a_factory_target_is_loaded_as_tensor_specs(tmp_path: Path) -> None:
    entry = entry_for(tmp_path, "tfmodels:dense", "[[25, 16]]")
    backend, loaded = load_entry(entry, tmp_path)
    assert backend.name == "tensorflow"
    assert loaded.args == (tf.TensorSpec((25, 16), tf.float32),)
    assert count_entry(entry, tmp_path).flops == 7425


def test_integer_inputs_keep_their_dtype(tmp_path: Path) -> None:
    entry = entry_for(tmp_path, "tfmodels:tokens", '[{shape = [2, 5], dtype = "int32"}]')
    _, loaded = load_entry(entry, tmp_path)
    assert loaded.args[0].dtype == tf.int32
    report = count_entry(entry, tmp_path)
    # emb: the gather is free, its negative-index wrap costs a compare (Less) and an add per id: 2*(2*5) = 20 (as
    # in the JAX engine); fc: 2*M*N*K = 2*(2*5)*3*4 = 240; params 10*4 + 4*3 = 52
    assert (report.flops, report.params) == (20 + 240, 52)
    assert (report.layers["emb"].flops, report.layers["fc"].flops) == (20, 240)


def test_named_inputs_are_one_dict_for_a_keras_model(tmp_path: Path) -> None:
    entry = entry_for(tmp_path, "tfmodels:two_inputs", "{a = [2, 4], b = [2, 6]}")
    _, loaded = load_entry(entry, tmp_path)
    assert set(loaded.args[0]) == {"a", "b"} and loaded.kwargs == {}
    report = count_entry(entry, tmp_path)
    assert report.flops == 2 * 2 * 3 * 10  # fc on the concatenation [2, 10]: 2*M*N*K = 120
    assert [item["name"] for item in report.inputs] == ["a", "b"]


def test_a_tf_function_target(tmp_path: Path) -> None:
    # q·kᵀ: [4, 6] by [5, 6]ᵀ: 2*4*5*6 = 240
    assert count_entry(entry_for(tmp_path, "tfmodels:scores", "[[4, 6], [5, 6]]"), tmp_path).flops == 240


def test_a_curve_over_a_named_dim(tmp_path: Path) -> None:
    from pytest_flopbudget._curve.engine import count_curve

    extra = "dims = { seq = 64 }\ncurve = { seq = [16, 256] }\n"
    _, formula = count_curve(entry_for(tmp_path, "tfmodels:self_scores", '[[1, "seq", 8]]', extra), tmp_path)
    # proj: 2*seq*8*8 + 8*seq (bias) = 136*seq; h·hᵀ: 2*seq*seq*8 = 16*seq**2: the formula the JAX engine finds
    # for the same model (tests/e2e/test_jax_budgets.py)
    assert formula.to_dict()["formula"]["flops"] == "16*seq**2 + 136*seq"


def test_an_option_it_does_not_honour_is_refused_at_the_key(tmp_path: Path) -> None:
    entry = entry_for(tmp_path, "tfmodels:dense", "[[25, 16]]", 'method = "decode"\n')
    with pytest.raises(LocatedError) as info:
        load_entry(entry, tmp_path)
    message = "tool.flopbudget.models.m.method: method applies to PyTorch targets only, not to TensorFlow models"
    assert str(info.value).endswith(message)


# -- SavedModel directories --------------------------------------------------------------------------------------


def test_a_saved_model_counts_without_its_variables(exported: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in exported.rglob("*"):
        target = copy / path.relative_to(exported)
        if path.is_dir():
            target.mkdir(exist_ok=True)
        else:
            target.write_bytes(path.read_bytes())
    before = count(str(copy), inputs={"x": [25, 16]})
    # the serving signature: the same Dense(9) on [25, 16], 7425 FLOPs, 153 params read off the variables' shapes
    assert (before.flops, before.macs, before.params) == (7425, 3600, 153)
    assert before.inputs == [{"name": "x", "shape": [25, 16], "dtype": "float32"}]
    data = sorted((copy / "variables").glob("variables.*"))
    assert data  # variables.index and variables.data-00000-of-00001
    for path in data:
        path.unlink()
    after = count(str(copy), inputs={"x": [25, 16]})
    assert after.to_dict() == before.to_dict()


def test_a_saved_models_open_dims_must_be_given(exported: Path) -> None:
    with pytest.raises(MissingInputSizes) as info:
        count(str(exported))
    assert f"count({str(exported)!r}, inputs={{'x': [<?>, 16]}})" in str(info.value)
    with pytest.raises(CountingError, match=r"inputs\['x'\] gives 15 at axis 1, where the signature fixes 16"):
        count(str(exported), inputs={"x": [25, 15]})
    with pytest.raises(CountingError, match="not training=True"):
        count(str(exported), inputs={"x": [25, 16]}, training=True)


def test_a_saved_model_target_is_relative_to_the_project_root(
    exported: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    (project / "models" / "dense").symlink_to(exported, target_is_directory=True)
    (project / "pyproject.toml").write_text(
        '[tool.flopbudget.models.m]\ntarget = "models/dense"\ninputs = {x = ["batch", 16]}\ndims = {batch = 25}\n'
        'flops = "1G"\n'
    )
    monkeypatch.chdir(tmp_path)  # not the project's root: the target is still found, relative to pyproject.toml
    entry = load_settings(project / "pyproject.toml").models["m"]
    backend, _ = load_entry(entry, project)
    assert backend.name == "savedmodel"
    assert count_entry(entry, project).flops == 7425  # the batch named and bound: 2*25*9*16 + 25*9


def test_a_saved_model_names_no_dims_of_its_own(exported: Path, tmp_path: Path) -> None:
    (tmp_path / "sm").symlink_to(exported, target_is_directory=True)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.flopbudget.models.m]\ntarget = "sm"\ninputs = {x = [25, 16]}\ndims = {batch = 4}\nflops = "1G"\n'
    )
    entry = load_settings(tmp_path / "pyproject.toml").models["m"]
    with pytest.raises(LocatedError, match=r"m\.dims: a SavedModel names no dims of its own"):
        load_entry(entry, tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.flopbudget.models.m]\ntarget = "sm"\ninputs = {x = [25, 16]}\ntraining = true\nflops = "1G"\n'
    )
    with pytest.raises(
        LocatedError, match="training = true applies to PyTorch, JAX or TensorFlow targets only, not to TensorFlow"
    ):
        load_settings(tmp_path / "pyproject.toml")


# -- lazy imports ------------------------------------------------------------------------------------------------


@pytest.mark.slow  # a process that imports torch
def test_a_torch_model_never_imports_tensorflow(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    (tmp_path / "torchmodels.py").write_text("import torch\n\ndef net():\n    return torch.nn.Linear(6, 5)\n")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.flopbudget.models.m]\ntarget = "torchmodels:net"\ninputs = [[4, 6]]\nflops = "1G"\n'
    )
    script = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        import torch
        from pytest_flopbudget import count
        from pytest_flopbudget._backends import count_entry
        from pytest_flopbudget._config.pyproject import load_settings

        root = Path(sys.argv[1])
        print(count(torch.nn.Linear(6, 5), torch.zeros(4, 6)).flops)
        print(count_entry(load_settings(root / "pyproject.toml").models["m"], root).flops)
        print(sorted(name for name in sys.modules if name.split(".")[0] in ("tensorflow", "keras", "tf_keras")))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    # 2*4*5*6 + 4*5 (bias) = 260, both ways; and not one tensorflow or keras module imported
    assert result.stdout.split("\n")[:3] == ["260", "260", "[]"]
