"""What the JAX backend takes and counts: Flax NNX and Linen modules, `jax.jit` functions and functions given jax
arrays; `package.module:factory` targets chosen by the object the factory returns; inputs as ShapeDtypeStructs;
refusals in one line; formulas for primitives; and no jax import for a PyTorch model."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pytest_flopbudget._config.location import LocatedError
from pytest_flopbudget._config.pyproject import ModelEntry, load_settings
from pytest_flopbudget._errors import CountingError

jax = pytest.importorskip("jax")
nnx = pytest.importorskip("flax.nnx")
linen = pytest.importorskip("flax.linen")
import jax.numpy as jnp  # noqa: E402

from pytest_flopbudget import count, register_formula  # noqa: E402
from pytest_flopbudget._backends import count_entry  # noqa: E402
from pytest_flopbudget._backends.dispatch import backend_for_call, load_entry  # noqa: E402
from pytest_flopbudget._backends.jax_models import JaxModels  # noqa: E402

JAX = JaxModels()
X = jax.ShapeDtypeStruct((4, 6), jnp.float32)

MODELS = """\
import jax
import jax.numpy as jnp
from flax import linen, nnx


class Dense(nnx.Module):
    def __init__(self, rngs):
        self.fc = nnx.Linear(6, 5, use_bias=False, rngs=rngs)

    def __call__(self, x):
        return self.fc(x)


class Tokens(nnx.Module):
    def __init__(self, rngs):
        self.emb = nnx.Embed(10, 4, rngs=rngs)
        self.fc = nnx.Linear(4, 3, use_bias=False, rngs=rngs)

    def __call__(self, ids):
        return self.fc(self.emb(ids))


class LinenDense(linen.Module):
    @linen.compact
    def __call__(self, x):
        return linen.Dense(5, use_bias=False, name="fc")(x)


def dense():
    return nnx.eval_shape(lambda: Dense(nnx.Rngs(0)))


def tokens():
    return nnx.eval_shape(lambda: Tokens(nnx.Rngs(0)))


def linen_dense():
    return LinenDense()


def scores():
    return jax.jit(lambda q, k: q @ k.T)


def not_a_model():
    return 42
"""


class NnxDense(nnx.Module):
    def __init__(self, rngs: Any) -> None:
        self.fc = nnx.Linear(6, 5, use_bias=False, rngs=rngs)

    def __call__(self, x: Any) -> Any:
        return self.fc(x)


class LinenDense(linen.Module):
    @linen.compact
    def __call__(self, x: Any) -> Any:
        return linen.Dense(5, use_bias=False, name="fc")(x)


def entry_for(root: Path, target: str, inputs: str, extra: str = "") -> ModelEntry:
    (root / "jaxmodels.py").write_text(MODELS)
    (root / "pyproject.toml").write_text(
        f'[tool.flopbudget.models.m]\ntarget = "{target}"\ninputs = {inputs}\nflops = "1G"\n{extra}'
    )
    sys.modules.pop("jaxmodels", None)
    return load_settings(root / "pyproject.toml").models["m"]


def nnx_dense() -> Any:
    return nnx.eval_shape(lambda: NnxDense(nnx.Rngs(0)))


def test_accepts_flax_modules_jitted_functions_and_functions_given_jax_arrays() -> None:
    assert JAX.accepts_model(nnx_dense())
    assert JAX.accepts_model(LinenDense())
    assert JAX.accepts_model(jax.jit(lambda x: x))
    assert not JAX.accepts_model(lambda x: x)  # a plain function says nothing until its arguments do
    assert JAX.accepts_call(lambda x: x, (X,), {})
    assert JAX.accepts_call(lambda x: x, (), {"x": jnp.zeros(3)})
    assert not JAX.accepts_call(lambda x: x, (3,), {})
    assert not JAX.accepts_model("pkg.mod:factory")
    assert backend_for_call(lambda x: x, (X,), {}) is not None


def test_count_a_module_and_a_function() -> None:
    # fc: 2*M*N*K = 2*4*5*6 = 240 FLOPs, 4*5*6 = 120 MACs; params 6*5 = 30
    nnx_report = count(nnx_dense(), X)
    assert (nnx_report.flops, nnx_report.macs, nnx_report.params) == (240, 120, 30)
    assert nnx_report.layers["fc"].flops == 240
    assert nnx_report.backend == "jax"
    linen_report = count(LinenDense(), jnp.zeros((4, 6)))
    assert (linen_report.flops, linen_report.params) == (240, 30)
    assert linen_report.layers["fc"].flops == 240
    # (4 x 6)·(6 x 5): 2*4*5*6 = 240
    assert count(lambda a, b: a @ b, X, jax.ShapeDtypeStruct((6, 5), jnp.float32)).flops == 240


def test_training_counts_forward_and_backward() -> None:
    report = count(nnx_dense(), X, training=True)
    # forward: fc 2*4*5*6 = 240, the loss's sum of 4*5 = 20 outputs; backward: dW = x^T·dy, 2*6*5*4 = 240 (the
    # input gets no gradient)
    assert (report.forward.flops, report.backward.flops) == (240 + 20, 240)
    assert report.training


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"method": "decode"}, "method=: not for a JAX model"),
        ({"execution": "real"}, "execution=: not for a JAX model"),
        ({"loss_fn": lambda out: out.sum()}, "loss_fn=: not for a JAX model"),
        ({"generate": 2}, "generate=N (N >= 1) counts a PyTorch model's inference"),
    ],
)
def test_count_refuses_what_it_does_not_honour(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(CountingError) as info:
        count(nnx_dense(), X, **kwargs)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_factory_target_is_loaded_as_shape_dtype_structs(tmp_path: Path) -> None:
    entry = entry_for(tmp_path, "jaxmodels:dense", "[[4, 6]]")
    backend, loaded = load_entry(entry, tmp_path)
    assert backend.name == "jax"
    assert loaded.args == (jax.ShapeDtypeStruct((4, 6), jnp.float32),)
    assert count_entry(entry, tmp_path).flops == 240  # 2*4*5*6


def test_integer_inputs_keep_their_dtype(tmp_path: Path) -> None:
    entry = entry_for(tmp_path, "jaxmodels:tokens", '[{shape = [2, 5], dtype = "int32"}]')
    _, loaded = load_entry(entry, tmp_path)
    assert loaded.args[0].dtype == jnp.int32
    report = count_entry(entry, tmp_path)
    # emb: nnx.Embed is a lookup, free (a named composite: jnp.take's wrap of negative ids is part of it);
    # fc: 2*M*N*K = 2*(2*5)*3*4 = 240; params 10*4 + 4*3 = 52
    assert (report.flops, report.params) == (240, 52)
    assert (report.layers["emb"].flops, report.layers["fc"].flops) == (0, 240)


@pytest.mark.parametrize(
    ("target", "inputs", "flops"),
    [
        ("jaxmodels:linen_dense", "[[4, 6]]", 240),  # 2*4*5*6
        ("jaxmodels:scores", "[[4, 6], [5, 6]]", 240),  # q·kᵀ: 2*4*5*6
    ],
)
def test_linen_and_jitted_function_targets(tmp_path: Path, target: str, inputs: str, flops: int) -> None:
    assert count_entry(entry_for(tmp_path, target, inputs), tmp_path).flops == flops


def test_an_option_it_does_not_honour_is_refused_at_the_key(tmp_path: Path) -> None:
    entry = entry_for(tmp_path, "jaxmodels:dense", "[[4, 6]]", 'method = "decode"\n')
    with pytest.raises(LocatedError) as info:
        load_entry(entry, tmp_path)
    message = "tool.flopbudget.models.m.method: method applies to PyTorch targets only, not to JAX models"
    assert str(info.value).endswith(message)


def test_a_factory_returning_neither_goes_to_pytorch_as_before(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    entry = entry_for(tmp_path, "jaxmodels:not_a_model", "[[4, 6]]")
    with pytest.raises(LocatedError) as info:
        load_entry(entry, tmp_path)
    assert "jaxmodels:not_a_model() returned an int, not a torch.nn.Module" in str(info.value)


def test_a_formula_for_a_primitive() -> None:
    def erf_of(x: Any) -> Any:
        return jax.lax.erf(x)

    assert count(erf_of, X).flops == 24  # erf: 1 per element, 4*6 = 24
    with pytest.raises(ValueError, match="JAX primitive 'erf' has a built-in formula in the jax backend"):
        register_formula("erf", lambda e: (0, 0), backend="jax")
    with register_formula("erf", lambda e: (10 * e.out_numel(), 0), backend="jax", override=True):
        assert count(erf_of, X).flops == 240  # 10 per element: 10*24
    assert count(erf_of, X).flops == 24  # the handle removed brings back the built-in formula


def test_a_formula_for_a_custom_primitive() -> None:
    from jax.extend.core import Primitive

    fused = Primitive("mylib_fused_gelu")
    fused.def_abstract_eval(lambda x: jax.core.ShapedArray(x.shape, x.dtype))

    def gelu(x: Any) -> Any:
        return fused.bind(x)

    before = count(gelu, X)
    assert before.flops == 0 and "mylib_fused_gelu" in before.skipped
    with register_formula(fused, lambda e: (8 * e.out_numel(), 0), backend="jax"):
        after = count(gelu, X)
    assert after.flops == 8 * 24 and not after.skipped  # 8 per element: 8*4*6 = 192


def test_formula_keys() -> None:
    assert JAX.formula_key("erf") == ("erf", "JAX primitive 'erf'")
    with pytest.raises(TypeError, match="a JAX primitive is named by its jaxpr name"):
        JAX.formula_key(42)
    with pytest.raises(ValueError, match="is not a jaxpr primitive name"):
        JAX.formula_key("lax.erf")


def test_a_torch_model_never_imports_jax(tmp_path: Path) -> None:
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
        print(sorted(name for name in sys.modules if name.split(".")[0] in ("jax", "jaxlib", "flax")))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    # 2*4*5*6 + 4*5 (bias) = 260, both ways; and not one jax, jaxlib or flax module imported
    assert result.stdout.split("\n")[:3] == ["260", "260", "[]"]
