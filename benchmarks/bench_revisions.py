"""Count time of this checkout against an earlier revision, measured in one run.

    python benchmarks/bench_revisions.py --against 99eb38d     # ResNet-50 (224) and Llama-7B on meta (seq 2048)

The other revision is extracted with `git archive` into a temporary folder (nothing is checked out here). Each
repetition runs one child process per revision, alternating, so load on the machine hits both alike; a child builds
the model, warms up with one count and times the next ones. The figure that matters is the ratio of the medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
import torch
from pytest_flopbudget import count
case, repeat = sys.argv[1], int(sys.argv[2])
if case == "resnet50":
    from examples.resnet import resnet50
    model, inputs = resnet50().eval(), (torch.randn(1, 3, 224, 224),)
else:
    from examples.decoder import Llama, LlamaConfig, llama_inputs
    cfg = LlamaConfig.llama_7b()
    with torch.device("meta"):
        model = Llama(cfg)
    inputs = llama_inputs(cfg, seq=2048)
with torch.no_grad():
    count(model, *inputs)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        report = count(model, *inputs)
        times.append(time.perf_counter() - start)
print(json.dumps({"median_s": sorted(times)[len(times) // 2], "macs": report.macs}))
"""


def extract(revision: str, into: Path) -> Path:
    archive = into / "rev.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "archive", revision], cwd=ROOT, stdout=out, check=True)
    tree = into / "tree"
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    return tree


def child(tree: Path, case: str, repeat: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, case, str(repeat)],
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", required=True, help="the earlier revision (commit, tag or branch)")
    parser.add_argument("--rounds", type=int, default=5, help="child processes per revision and case")
    parser.add_argument("--repeat", type=int, default=5, help="timed counts per child")
    args = parser.parse_args(argv)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        old_tree = extract(args.against, Path(tmp))
        for case in ("resnet50", "llama7b"):
            runs: dict[str, list[float]] = {"before": [], "after": []}
            macs: dict[str, float] = {}
            for _ in range(args.rounds):
                for label, tree in (("before", old_tree), ("after", ROOT)):
                    result = child(tree, case, args.repeat)
                    runs[label].append(result["median_s"])
                    macs[label] = result["macs"]
            before, after = statistics.median(runs["before"]), statistics.median(runs["after"])
            results[case] = {
                "before_s": before,
                "after_s": after,
                "after_over_before": after / before,
                "same_macs": macs["before"] == macs["after"],
            }
    print(json.dumps({"against": args.against, **results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
