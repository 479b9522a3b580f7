"""How long the pre-commit hook takes, with and without a count-cache hit, against `python -c "import torch"`.

    python benchmarks/bench_hook.py             # 5 rounds
    python benchmarks/bench_hook.py --rounds 9

Builds a throwaway git repository with the three models a new user tried (a small CNN, a small GPT-2 built with
transformers from a config, and an ONNX file), records their baselines, installs a `repo: local` pre-commit hook
running `flopbudget check`, and then times, interleaved round by round so that load on the machine hits every case
alike (medians, wall clock):

- `import torch`: `python -c "import torch"`, the floor of anything that counts a PyTorch model;
- hook, cache hit: `pre-commit run` after a change to a test file only (no model read it);
- hook, one model changed: after an edit to the CNN's file (only the CNN recounts);
- hook, no cache: the same hook with `FLOPBUDGET_NO_CACHE=1` (every model counted, as before the cache);
- `flopbudget check`, cache hit: the command alone, without pre-commit's own start-up.
- `flopbudget check`, cache miss vs `--no-cache`, in a second project with two transformers models in one module
  (a tiny Llama and a tiny BERT built from configs): the cost of recording what a count read, which must stay
  within 1.15x of counting without the cache (the ratio is the median of the per-round ratios).

Each is also given as a ratio to `import torch` measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

BIN = Path(sys.executable).parent

CNN = """\
from torch import nn


def build():
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10),
    )
"""

GPT = """\
from transformers import GPT2Config, GPT2LMHeadModel


def build():
    config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=128)
    return GPT2LMHeadModel(config)
"""

PYPROJECT = """\
[tool.flopbudget.models.cnn]
target = "cnn:build"
inputs = [[1, 3, 32, 32]]
flops = "20M"

[tool.flopbudget.models.gpt2]
target = "gpt:build"
inputs = [{ shape = [1, 32], dtype = "int64" }]
flops = "200M"

[tool.flopbudget.models.onnx_net]
target = "model.onnx"
flops = "20M"
"""

TWO_TRANSFORMERS = """\
from transformers import BertConfig, BertModel, LlamaConfig, LlamaForCausalLM


def llama():
    config = LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=1000, max_position_embeddings=128)
    return LlamaForCausalLM(config)


def bert():
    config = BertConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                        vocab_size=1000, max_position_embeddings=128)
    return BertModel(config)
"""

TWO_TRANSFORMERS_PYPROJECT = """\
[tool.flopbudget.models.llama]
target = "tmodels:llama"
inputs = [{ shape = [1, 32], dtype = "int64" }]
flops = "200M"

[tool.flopbudget.models.bert]
target = "tmodels:bert"
inputs = [{ shape = [1, 32], dtype = "int64" }]
flops = "200M"
"""

HOOK = """\
repos:
  - repo: local
    hooks:
      - id: flopbudget
        name: flopbudget
        entry: flopbudget check
        language: system
        pass_filenames: false
        require_serial: true
        always_run: true
"""


def write_onnx(path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    weight = helper.make_tensor("w", TensorProto.FLOAT, [16, 3, 3, 3], [0.0] * 432)
    fc = helper.make_tensor("fc", TensorProto.FLOAT, [16, 10], [0.0] * 160)
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["r"]),
            helper.make_node("GlobalAveragePool", ["r"], ["p"]),
            helper.make_node("Flatten", ["p"], ["f"]),
            helper.make_node("MatMul", ["f", "fc"], ["y"]),
        ],
        "net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        [weight, fc],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def environment(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CI" and not k.startswith(("PRE_COMMIT", "FLOPBUDGET_"))}
    env.update(PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", PRE_COMMIT_HOME=str(home), **extra)
    env.setdefault("XDG_CACHE_HOME", str(home.parent / "xdg-cache"))  # the key that signs records: not the user's
    return env


def run(command: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return elapsed


def build_repo(repo: Path, env: dict[str, str]) -> None:
    (repo / "cnn.py").write_text(CNN)
    (repo / "gpt.py").write_text(GPT)
    write_onnx(repo / "model.onnx")
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / ".pre-commit-config.yaml").write_text(HOOK)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_models.py").write_text("def test_nothing():\n    pass\n")
    for command in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "config", "user.email", "bench@example.invalid"],
        ["git", "config", "user.name", "bench"],
        [str(BIN / "flopbudget"), "check", "--update", "--no-cache"],
        ["git", "add", "-A"],
        ["git", "commit", "-qm", "models and baselines"],
    ):
        run(command, repo, env)


MISS = "check, cache miss (two transformers models)"
NO_CACHE = "check, --no-cache (two transformers models)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-hook-"))
    try:
        repo, home = work / "repo", work / "pre-commit-home"
        repo.mkdir()
        env = environment(home)
        build_repo(repo, env)
        hook = [str(BIN / "pre-commit"), "run", "flopbudget", "--files", "tests/test_models.py"]
        hook_cnn = [str(BIN / "pre-commit"), "run", "flopbudget", "--files", "cnn.py"]
        run(hook, repo, env)  # fills the cache (and pre-commit's own environment cache)
        cnn = repo / "cnn.py"
        two = work / "two-transformers"
        two.mkdir()
        (two / "tmodels.py").write_text(TWO_TRANSFORMERS)
        (two / "pyproject.toml").write_text(TWO_TRANSFORMERS_PYPROJECT)
        check = [str(BIN / "flopbudget"), "check"]

        def forget_counts() -> None:
            shutil.rmtree(two / ".flopbudget_cache", ignore_errors=True)

        def test_edit() -> None:
            path = repo / "tests" / "test_models.py"
            path.write_text(path.read_text() + "# edited\n")

        def model_edit() -> None:
            cnn.write_text(cnn.read_text().replace("nn.Linear(32, 10)", "nn.Linear(32, 11)", 1)
                           if "Linear(32, 10)" in cnn.read_text() else CNN)  # fmt: skip

        cases: dict[str, tuple[Callable[[], None], list[str], dict[str, str]]] = {
            "import torch": (lambda: None, [sys.executable, "-c", "import torch"], env),
            "hook, cache hit (a test file changed)": (test_edit, hook, env),
            "hook, one model changed (cnn.py)": (model_edit, hook_cnn, env),
            "hook, no cache (every model counted)": (lambda: None, hook, environment(home, FLOPBUDGET_NO_CACHE="1")),
            "flopbudget check, cache hit": (lambda: None, check, env),
            MISS: (forget_counts, check, env),
            NO_CACHE: (lambda: None, [*check, "--no-cache"], env),
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, (prepare, command, case_env) in cases.items():
                prepare()
                times[name].append(run(command, two if name in (MISS, NO_CACHE) else repo, case_env))
                if name.startswith("hook, one model"):
                    run(hook, repo, env)  # the cache holds the edited CNN now: the next hit case is a hit again
        medians = {name: statistics.median(values) for name, values in times.items()}
        floor = medians["import torch"]
        print(f"{'case':45} {'median s':>9} {'/ import torch':>15}")
        for name, value in medians.items():
            print(f"{name:45} {value:9.2f} {value / floor:14.2f}x")
        ratio = statistics.median(miss / plain for miss, plain in zip(times[MISS], times[NO_CACHE]))
        print(f"cache miss / --no-cache (two transformers models): {ratio:.2f}x (median of the rounds' ratios)")
        print(json.dumps({"rounds": args.rounds, "median_s": medians, "miss_over_no_cache": ratio}, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
