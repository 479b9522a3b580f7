"""The `flopbudget` command (also `python -m pytest_flopbudget`): count, check and diff model compute.

`main(argv) -> int` in the style of pre-commit-hooks: 0 when every model is within budget, 1 on an overrun, 2 when
the check could not run (usage or configuration error, a model that does not import or run). Errors caused by the
user's input are printed as one line saying what to fix, never as a traceback into this package.

Start-up is kept cheap because this runs on every commit: this module imports nothing but the standard library
and the subcommand modules are imported when chosen, so `--help` and ONNX-only projects never import torch.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from pytest_flopbudget._cli.count_formats import FORMATS
from pytest_flopbudget._cli.parallel import JOBS_HELP, parse_jobs
from pytest_flopbudget._config.pyproject import generate_problem
from pytest_flopbudget._errors import FlopBudgetError
from pytest_flopbudget._metrics import METRICS, PEAK_MEMORY, PLUGIN_PROBLEMS, by_name
from pytest_flopbudget._render.roofline import PROFILES
from pytest_flopbudget._safe_text import SafeStream, one_line, safe_line, safe_text
from pytest_flopbudget._version import __version__

PROG = "flopbudget"

DESCRIPTION = """\
Count the FLOPs, MACs and parameters of neural networks exactly and check them against the budgets in
pyproject.toml ([tool.flopbudget]). The same checks run in pytest (the pytest-flopbudget plugin) and as a
pre-commit hook (`flopbudget check`)."""

EPILOG = """\
examples:
  flopbudget count examples.resnet:resnet50 --input 1,3,224,224
  flopbudget init examples.resnet:resnet50 --input 1,3,224,224
  flopbudget check
  flopbudget check --update resnet50
  flopbudget diff resnet50
  flopbudget explain examples.resnet:resnet50 --input 1,3,224,224 --vs fvcore   # why fvcore says 4.11G
  flopbudget count pkg.lm:build --input 1,8192:int64 --training --convention megatron   # Megatron's figure
  flopbudget mfu pkg.lm:build --input 1,seq:int64 --dim seq=128..8192 --out mfu.json   # the MFU numerator
  flopbudget comment "$RUNNER_TEMP/flopbudget-comment.md"   # in CI: post the pull-request comment
  flopbudget check --shard 2/3 --report json:shard-2.json  # one of 3 CI machines
  flopbudget merge shard-1.json shard-2.json shard-3.json   # the 3 machines' results judged as one run

exit status: 0 all within budget, 1 a model is over budget, 2 the check could not run.
Run `flopbudget COMMAND --help` for the options of each command."""

COUNT_EPILOG = """\
TARGET is one of:
  package.module:factory   a torch.nn.Module, or a callable returning one (called with no arguments);
                           imported with the current directory on sys.path
  path/to/model.onnx       an ONNX file (weights are never read)
  NAME                     a model of [tool.flopbudget.models] in pyproject.toml (its inputs unless --input)

--input gives one input tensor per SHAPE: sizes separated by commas (or x), an optional NAME= in front (a
keyword argument, or an ONNX graph input) and an optional :DTYPE at the end. Inputs are zero tensors (on the
meta device unless --execution real): FLOPs depend on shapes only, so no memory is used whatever the size.

examples:
  flopbudget count examples.resnet:resnet50 --input 1,3,224,224
  flopbudget count examples.resnet:resnet50 --input 8,3,224,224 --training --depth 1
  flopbudget count examples.factories:gpt_tiny --input 1,64:int64 --format json
  flopbudget count resnet50 --format html --output resnet50.html   # a picture, with the budget use
  flopbudget count pkg.models:two_tower --input 1,3,224,224 1,77:int64
  flopbudget count model.onnx --input input=1,3,224,224
  flopbudget count resnet50 --depth all"""

CHECK_EPILOG = """\
Counts every model of [tool.flopbudget.models] (or the NAMEs given) and compares it with its budget and with
its baseline in baseline-dir (default .flopbudget/). An overrun prints a one-line reason and the per-layer diff
against the baseline, exactly as pytest does. Nothing is written unless --update is given.

exit status: 0 all within budget, 1 a model is over budget, 2 the check could not run (no pyproject.toml or
[tool.flopbudget] table, unknown NAME, a target that does not import, a model that fails to run).

examples:
  flopbudget check                      # every model; the pre-commit hook runs this
  flopbudget check resnet50 vit_tiny    # only these
  flopbudget check --update             # record the current counts as the new baselines (commit them)
  flopbudget check -j auto              # count as many models at once as there are cores
  flopbudget check --base-ref origin/main --report gitlab:gl-code-quality.json   # in CI
  flopbudget check --pyproject a/pyproject.toml --pyproject b/pyproject.toml   # two projects, one run
  flopbudget check --shard 2/3 --report json:shard-2.json   # this machine's third; then flopbudget merge"""

INIT_EPILOG = """\
Counts each model as `flopbudget check` will and adds a [tool.flopbudget.models.NAME] table to pyproject.toml
(the nearest one, or a new one here) with suggested ceilings: flops and params = the count + --headroom percent
(default 2), rounded up to 3 significant digits; max-skipped-ops = the op calls not counted now. Existing text is
kept byte for byte (the tables are appended); a NAME that exists is refused unless --force.

TARGET is package.module:factory (with --input), path/to/model.onnx, or a folder: every .onnx file below it.
NAME defaults to the factory's name (its module's for generic names such as build), or the file's stem.

examples:
  flopbudget init pkg.models:resnet18 --input 1,3,224,224
  flopbudget init pkg.lm:build --input 1,128:int64 --name lm
  flopbudget init model.onnx --input input=1,3,224,224
  flopbudget init models/ --dry-run
then: flopbudget check --update, and commit pyproject.toml and .flopbudget/"""

DIFF_EPILOG = """\
Counts the models and prints, per metric (FLOPs, MACs, params, skipped ops), the layers whose cost changed
since the baseline: added, removed or changed, largest change first. Budgets are not looked at and nothing is
written. Exit status 0, or 2 if a model has no baseline or could not be counted.

examples:
  flopbudget diff resnet50
  flopbudget diff                       # every model
  flopbudget diff resnet50 --format html -o diff.html   # base vs now as an icicle coloured by growth"""


EXPLAIN_EPILOG = """\
Runs PEER on one real forward of the model (built by the factory on the CPU: keep it small) and counts the same
model and inputs ourselves, then pairs the two layer by layer and op by op and lists every difference with its
reason: op not supported, counted as zero, MACs vs FLOPs, bias add, residual add missed by hooks, fused
attention, per-element cost, counted twice. The items sum exactly to ours - theirs. A PEER that is not installed
is one line saying what to pip install.

PEER for a PyTorch model: fvcore, ptflops, thop, calflops, torch (torch.utils.flop_counter.FlopCounterMode),
deepspeed; for a JAX model: xla (XLA's cost analysis, op by op: scan counted once, transcendentals, n - m
reductions); for a TensorFlow model: tf-profiler (tf.compat.v1.profiler's float_operation: no rule, Rsqrt, n - 1
reductions).

examples:
  flopbudget explain examples.resnet:resnet50 --input 1,3,224,224 --vs fvcore
  flopbudget explain examples.vit:vit_tiny --input 1,3,32,32 --vs torch --per-layer
  flopbudget explain pkg.lm:tiny_qwen --input 1,16:int64 --vs calflops --format json
  flopbudget explain examples.flax_linen:scanned_stack --input 8,64 --vs xla"""

MFU_EPILOG = """\
The formulas are exact on the range (the curve machinery: counts on a lattice of sizes, verified off it). The
conventions are those of docs/conventions-profiles.md that price a training step: megatron, megatron-causal,
palm, torchtitan, maxtext. A training loop computes MFU from the artifact:
  per_token = eval(json.load(open("mfu.json"))["python"]["exact"], {"seq": 8192})

examples:
  flopbudget mfu examples.factories:llama_tiny --input 1,seq:int64 --dim seq=64..512
  flopbudget mfu pkg.lm:build --input 1,seq:int64 --dim seq=128..8192 --out mfu.json"""

MERGE_EPILOG = """\
Refused in one line each, with nothing written (exit status 2): shards that saw different configurations (the
tool's version, pyproject.toml, --base-ref and its commit, require-baseline) or different baselines (naming the
model), counted with different library versions, or a model counted by two shards (naming it). A model in no
shard's results (a shard's file missing or unreadable) is reported as not checked, named, in every output (exit
status 2). Otherwise the exit status is the whole run's: 0 all within budget, 1 a model is over budget, 2 a model
could not be checked.

examples:
  flopbudget check --shard 1/3 --report json:shard-1.json      # on each of 3 machines
  flopbudget merge shard-*.json --report markdown:summary.md   # then once, on the three files"""


COMMENT_EPILOG = """\
Run by the GitHub Action's last step, the only one with the job's token, as
  python -I -m pytest_flopbudget comment --title TITLE --title TITLE BODY_FILE BODY_FILE
from a directory of its own: -I keeps the working directory, PYTHONPATH and the user's site-packages off
sys.path, so a module the project's code left in the checkout or in RUNNER_TEMP cannot run with the token.
A BODY_FILE that was never written (its run stopped first) is left out. Posting never fails: a missing token, a
fork's read-only token or an unreachable API is one ::notice:: line and exit status 0; a redirect on a write or
to another origin (the token is sent to the API's origin only) is one ::error:: line and exit status 1; a usage
error exits 2.

examples:
  flopbudget comment "$RUNNER_TEMP/flopbudget-comment.md"
  flopbudget comment --title check --title pytest check.md pytest.md --footer "Pictures: [page](URL)"
"""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (what is wrong and where help is), not the usage block.

    argparse quotes the command line in its messages (`unrecognized arguments: ...` echoes argv as it is), and an
    argument may hold a newline, an escape sequence or a `::warning::` that the CI runner would obey: the message
    goes through the safe-text filter and stays on one line, like every other line this command prints.
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, safe_line(one_line(f"{self.prog}: error: {message} (see `{self.prog} --help`)")) + "\n")


def build_parser() -> argparse.ArgumentParser:
    from pytest_flopbudget._reporters.ci import SPEC_HELP

    parser = _Parser(
        prog=PROG, description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__} (pytest-flopbudget)")
    tracebacks = _Parser(add_help=False)
    tracebacks.add_argument(
        "--traceback", action="store_true", help="show the Python traceback of an internal error (for bug reports)"
    )
    common = _Parser(add_help=False, parents=[tracebacks])
    common.add_argument(
        "--pyproject",
        metavar="PATH",
        help="the pyproject.toml to read (default: the nearest one in the current directory or above)",
    )
    model_inputs = _Parser(add_help=False)  # how a model is run: shared by count and init, which writes them down
    model_inputs.add_argument(
        "-i",
        "--input",
        action="extend",
        nargs="+",
        metavar="SHAPE",
        help="input shapes such as 1,3,224,224, ids=1,16:int64 or x=1,3,224,224, one per input (list several "
        "or repeat the option), or one package.module:function returning the example inputs",
    )
    model_inputs.add_argument(
        "--dtype",
        help="dtype of the generated inputs (default float32, or int64 for an input that feeds an embedding)",
    )
    model_inputs.add_argument(
        "--training", action="store_true", help="count one training step: forward, loss and backward (PyTorch)"
    )
    model_inputs.add_argument(
        "--execution",
        choices=("fake", "real"),
        help="fake (default): fake tensors, no arithmetic; real: run the real forward, for models fake tensors "
        "cannot run",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    count = commands.add_parser(
        "count",
        parents=[common, model_inputs],
        help="print the per-layer FLOPs, MACs and params of one model",
        description="Print the per-layer table of one model: FLOPs, MACs and params of each module (inclusive\n"
        "of its children) to a depth, their share of the total, and every op that could not be counted.",
        epilog=COUNT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    count.add_argument("target", metavar="TARGET", help="package.module:factory, path/to/model.onnx or a model NAME")
    count.add_argument(
        "--method", metavar="NAME", help="count this method instead of forward, e.g. decode or encode (PyTorch)"
    )
    count.add_argument(
        "--generate",
        type=_tokens,
        metavar="N",
        help="count a greedy generation of N new tokens: the prefill, then N-1 cached decode steps, each a phase "
        "(Hugging Face generate, or --method STEP --decode-inputs pkg.mod:fn; docs/generation.md)",
    )
    count.add_argument(
        "--decode-inputs",
        metavar="pkg.mod:fn",
        help="with --generate, for a model without Hugging Face's generate: fn(model, context) builds the inputs "
        "of one decode step (--method) with a cache of context tokens",
    )
    count.add_argument(
        "--depth",
        type=_depth,
        default=2,
        metavar="N",
        help="module tree depth of the table (default 2; 0 = the model only; 'all' = every module)",
    )
    count.add_argument(
        "--format",
        choices=tuple(FORMATS),
        default="table",
        help="table (default), json (the full Report), svg or html (an icicle graph of the module tree, each box "
        "as wide as its cost; with the budget use of a pyproject model)",
    )
    count.add_argument(
        "--metric",
        choices=(*(str(metric) for metric in METRICS.counted), str(PEAK_MEMORY)),
        help="what the box widths of --format svg/html show (default flops); peak-memory draws live bytes over "
        "the call instead",
    )
    count.add_argument(
        "--hardware",
        metavar="NAME[:DTYPE]",
        help=f"add a roofline estimate per layer on a hardware profile ({', '.join(sorted(PROFILES))}); the dtype "
        "whose peak applies is read from the parameters unless given (h100-sxm:bf16)",
    )
    count.add_argument("-o", "--output", metavar="PATH", help="write to PATH (atomically) instead of stdout")
    count.add_argument(
        "--dim",
        action="append",
        metavar="NAME=SIZE|LOW..HIGH",
        help="size a dim named in --input (1,seq:int64) or in an ONNX graph (batch, sequence): seq=2048 counts at "
        "that size; seq=64..8192 also gives each metric as an exact formula of seq, per layer (repeat for "
        "several dims)",
    )
    count.add_argument(
        "--convention",
        action="append",
        metavar="NAME",
        help="also give the FLOPs under a stack's convention, next to the exact count, with the difference itemised "
        "(megatron, megatron-causal, palm, torchtitan, maxtext, vllm, ...: docs/conventions-profiles.md; repeat it)",
    )
    count.set_defaults(handler=_count)

    check = commands.add_parser(
        "check",
        parents=[tracebacks],
        help="check every pyproject model against its budget and baseline (the pre-commit hook)",
        description="Check the models of [tool.flopbudget.models] against their budgets and baselines.",
        epilog=CHECK_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("names", nargs="*", metavar="NAME", help="models to check (default: all)")
    check.add_argument(
        "--pyproject",
        action="append",
        metavar="PATH",
        help="the pyproject.toml to read (default: the nearest one in the current directory or above); repeat it "
        "to check several projects (a monorepo) in one run with one summary, a section per project",
    )
    check.add_argument(
        "--update",
        action="store_true",
        help="write the baselines (baseline-dir/NAME.json) from the current counts and exit 0 unless a model "
        "could not be counted",
    )
    check.add_argument("--report", action="append", default=[], metavar="SPEC", help=SPEC_HELP)
    check.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text (default), or json: the results document of --report json:PATH on stdout, and the text on "
        "stderr (for `flopbudget check --format json | jq`)",
    )
    check.add_argument(
        "--base-ref",
        metavar="REF",
        help="warn about every budget raised or removed since the git ref REF (e.g. origin/main)",
    )
    check.add_argument(
        "--require-baseline",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="fail a budgeted model that has no committed baseline (default: require-baseline in pyproject, else on "
        "when the CI environment variable is set)",
    )
    check.add_argument(
        "--cache",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="reuse a model's count while no file, package or environment variable it read has changed (default: "
        "on, off when the CI or FLOPBUDGET_NO_CACHE environment variable is set)",
    )
    # Matched whole before argparse splits at "=", so `--cache` stays a flag (`check --cache resnet50` still works).
    check.add_argument(
        "--cache=verify",
        dest="cache",
        action="store_const",
        const="verify",
        help="count every model and fail where a cached count would have answered differently",
    )
    check.add_argument(
        "--shard",
        metavar="K/N",
        help="count only shard K of N (1 <= K <= N) of the models, balanced by the work their baselines record, and "
        "write the part's results with --report json:PATH for `flopbudget merge`; auto: K and N from "
        "FLOPBUDGET_SHARD_INDEX/FLOPBUDGET_SHARD_TOTAL or GitLab's CI_NODE_INDEX/CI_NODE_TOTAL (docs/ci.md)",
    )
    check.add_argument(
        "--cache-dir",
        metavar="PATH",
        help="where counts are cached (default: FLOPBUDGET_CACHE_DIR, else .flopbudget_cache next to pyproject.toml)",
    )
    check.add_argument("-j", "--jobs", type=parse_jobs, default=1, metavar="N", help=JOBS_HELP)
    check.add_argument(
        "--convention",
        action="append",
        default=[],
        metavar="NAME",
        help="also print each model's FLOPs under a stack's convention (megatron, palm, ...), itemised against the "
        "exact count; a budget judges one with convention = NAME in its table (docs/conventions-profiles.md)",
    )
    check.set_defaults(handler=_check)

    init = commands.add_parser(
        "init",
        parents=[common, model_inputs],
        help="add budgets for models to pyproject.toml, with ceilings suggested from a count",
        description="Count models and add their [tool.flopbudget.models.NAME] tables to pyproject.toml.",
        epilog=INIT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    init.add_argument(
        "targets", nargs="+", metavar="TARGET", help="package.module:factory, path/to/model.onnx or a folder"
    )
    init.add_argument("--name", help="the model's name in [tool.flopbudget.models] (one target only)")
    init.add_argument(
        "--headroom", metavar="PERCENT", help="ceilings' room over the count, in percent (default 2; 0 = none)"
    )
    init.add_argument("--force", action="store_true", help="replace a model table of the same name")
    init.add_argument("--dry-run", action="store_true", help="print the tables instead of writing pyproject.toml")
    init.set_defaults(handler=_init)

    diff = commands.add_parser(
        "diff",
        parents=[common],
        help="show the per-layer change since the baseline, without judging",
        description="Show the per-layer difference between the current count and the baseline.",
        epilog=DIFF_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    diff.add_argument("names", nargs="*", metavar="NAME", help="models to compare (default: all)")
    diff.add_argument(
        "--format",
        choices=("text", "svg", "html"),
        default="text",
        help="text (default), or svg or html: one model's icicle (box widths from the count now) coloured by each "
        "layer's change against the baseline",
    )
    diff.add_argument(
        "--metric",
        choices=tuple(str(metric) for metric in METRICS.counted),
        help="what the boxes of --format svg/html show and are coloured by (default flops)",
    )
    diff.add_argument("-o", "--output", metavar="PATH", help="write to PATH (atomically) instead of stdout")
    diff.set_defaults(handler=_diff)

    explain = commands.add_parser(
        "explain",
        parents=[common],
        help="why another counter's figure differs from ours: every difference, with its reason",
        description="Count one model ourselves and with another counter (PEER), and itemise the difference per\n"
        "layer and op, each item with its reason; the items sum exactly to ours - theirs.",
        epilog=EXPLAIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    explain.add_argument("target", metavar="TARGET", help="package.module:factory or a model NAME of pyproject.toml")
    explain.add_argument("--vs", required=True, metavar="PEER", help="the counter to compare with (see below)")
    explain.add_argument(
        "-i",
        "--input",
        action="extend",
        nargs="+",
        metavar="SHAPE",
        help="input shapes as for `flopbudget count` (1,3,224,224, ids=1,16:int64), or package.module:function",
    )
    explain.add_argument("--dtype", help="dtype of the generated inputs (default float32, or int64 for token ids)")
    explain.add_argument(
        "--dim", action="append", metavar="NAME=SIZE", help="size a dim named in --input (1,seq:int64): seq=128"
    )
    explain.add_argument(
        "--format",
        choices=("table", "json"),
        default="table",
        help="table (default), or json: ours, theirs and the items (layer, op, ours, theirs, reason)",
    )
    explain.add_argument(
        "--per-layer", action="store_true", help="one line per layer and op, not one per reason and op"
    )
    explain.set_defaults(handler=_explain)

    mfu = commands.add_parser(
        "mfu",
        parents=[common],
        help="the MFU numerator: training FLOPs per token as a formula of the sequence length, under each convention",
        description="Count one training step at the sizes of a range of the sequence length and give its FLOPs per\n"
        "token as an exact formula, and the same under each LLM stack's convention (megatron, palm, torchtitan,\n"
        "...) with the difference by reason; --out writes the JSON a training loop reads.",
        epilog=MFU_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mfu.add_argument("target", metavar="TARGET", help="package.module:factory or a model NAME of pyproject.toml")
    mfu.add_argument(
        "-i", "--input", action="extend", nargs="+", metavar="SHAPE", help="input shapes naming the dim: 1,seq:int64"
    )
    mfu.add_argument("--dtype", help="dtype of the generated inputs (default float32, or int64 for token ids)")
    mfu.add_argument("--dim", action="append", metavar="NAME=LOW..HIGH", help="the range of the dim: seq=64..8192")
    mfu.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or json")
    mfu.add_argument("--out", metavar="PATH", help="write the JSON artifact (formulas and Python expressions) here")
    mfu.set_defaults(handler=_mfu)

    merge = commands.add_parser(
        "merge",
        help="judge the results of the shards of one run (check --shard K/N --report json:PATH) as one run",
        description="Merge the results the shards of one run wrote (`flopbudget check --shard K/N --report\n"
        "json:PATH`, or pytest's --flopbudget-shard) and write what the whole run would have: one terminal text,\n"
        "one exit status, one job summary, one comment body, one pictures page, one set of exports. Reads the files\n"
        "only: no pyproject.toml, no baseline, no model code.",
        epilog=MERGE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    merge.add_argument("paths", nargs="+", metavar="PATH", help="a shard's results (--report json:PATH)")
    merge.add_argument("--report", action="append", default=[], metavar="SPEC", help=SPEC_HELP)
    merge.add_argument(
        "--traceback", action="store_true", help="show the Python traceback of an internal error (for bug reports)"
    )
    merge.set_defaults(handler=_merge)
    comment = commands.add_parser(
        "comment",
        help="post the bodies --report comment:PATH wrote as the pull request's comment (the action's last step)",
        description="Post the pull-request comment: the bodies --report comment:PATH wrote (one, or each under its\n"
        "--title), created once and edited in place on every push. Reads GITHUB_TOKEN, GITHUB_REPOSITORY,\n"
        "GITHUB_EVENT_PATH and GITHUB_API_URL as a GitHub Actions step sees them.",
        epilog=COMMENT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    comment.add_argument("bodies", nargs="+", metavar="BODY_FILE", help="a body --report comment:PATH wrote")
    comment.add_argument(
        "--title",
        action="append",
        default=[],
        metavar="TITLE",
        help="the heading of each BODY_FILE when several are merged, one per BODY_FILE in the same order (default: "
        "the file's name)",
    )
    comment.add_argument("--footer", default="", metavar="LINE", help="a last line, kept whatever is cut")
    comment.add_argument(
        "--timeout",
        type=_seconds,
        default=120.0,
        metavar="SECONDS",
        help="every call to the API and every answer ends within this time (default 120)",
    )
    comment.add_argument(
        "--traceback", action="store_true", help="show the Python traceback of an internal error (for bug reports)"
    )
    comment.set_defaults(handler=_comment)
    return parser


def console_main() -> None:
    """The `flopbudget` script and `python -m pytest_flopbudget`: `main()`, then exit.

    Once torch is loaded, the interpreter's own teardown (freeing torch's and torch._dynamo's state) takes about a
    second, a fifth of a pre-commit run; every file we write is complete and closed by now, so after flushing the
    standard streams the process ends at once.
    """
    code = main()
    if "torch" in sys.modules:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)
    sys.exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    if PLUGIN_PROBLEMS:  # a metric plugin that could not be added (one line each): its budgets would be unknown keys
        return _fail(PLUGIN_PROBLEMS)
    # Importing the user's model code must not leave __pycache__ directories behind: a hook that creates files
    # fails `git status`-clean checks, and this command promises to write nothing unless --update is given.
    dont_write_bytecode = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        code = int(args.handler(args))
        if sys.stdout is not None:
            _out().flush()  # a full device fails here, as one line, not in the interpreter's teardown
        return code
    except OutputError as exc:
        _silence_stdout()  # what is still buffered for stdout cannot be written either: drop it quietly
        return _fail([str(exc)])
    except FlopBudgetError as exc:
        return _fail(str(exc).splitlines() or [type(exc).__name__])
    except KeyboardInterrupt:
        return _fail(["interrupted"], status=130)
    except BrokenPipeError:
        _silence_stdout()  # `flopbudget count ... | head`: the reader has gone, so there is no one to tell
        return 1
    except Exception as exc:
        if args.traceback:
            raise
        detail = " ".join(str(exc).split())[:300]
        return _fail(
            [
                f"internal error: {type(exc).__name__}: {detail}; "
                f"rerun with --traceback and report it at the pytest-flopbudget issue tracker"
            ]
        )
    finally:
        sys.dont_write_bytecode = dont_write_bytecode


# -- subcommands ---------------------------------------------------------------------------------------------------


def _count(args: argparse.Namespace) -> int:
    from pytest_flopbudget._cli.count import CountRequest, run_count

    metric = by_name(args.metric) if args.metric else None
    request = CountRequest(
        target=args.target, input=args.input, dtype=args.dtype, training=args.training, execution=args.execution,
        method=args.method, depth=args.depth, format=args.format, pyproject=args.pyproject, metric=metric,
        output=args.output, hardware=args.hardware, dims=args.dim, generate=args.generate,
        decode_inputs=args.decode_inputs, conventions=args.convention,
    )  # fmt: skip
    return run_count(request, _out(), _err())


def _check(args: argparse.Namespace) -> int:
    from pytest_flopbudget._cli.check import run_check

    pyprojects = args.pyproject or []
    if len(pyprojects) > 1:
        from pytest_flopbudget._cli.projects import run_projects

        if args.convention:  # a budget's `convention = NAME` is judged in every project; the printed table is not
            raise FlopBudgetError("--convention prints one project's models: give one --pyproject with it")

        return run_projects(
            pyprojects=pyprojects, names=args.names, update=args.update, reports=args.report, base_ref=args.base_ref,
            out=_out(), err=_err(), require_baseline=args.require_baseline, cache=args.cache,
            cache_dir=args.cache_dir, format=args.format, shard=args.shard, jobs=args.jobs,
        )  # fmt: skip
    return run_check(
        pyproject=pyprojects[0] if pyprojects else None, names=args.names, update=args.update, reports=args.report,
        base_ref=args.base_ref, out=_out(), err=_err(), require_baseline=args.require_baseline, cache=args.cache,
        cache_dir=args.cache_dir, format=args.format, shard=args.shard, jobs=args.jobs, conventions=args.convention,
    )  # fmt: skip


def _init(args: argparse.Namespace) -> int:
    from pytest_flopbudget._cli.init import InitRequest, run_init

    request = InitRequest(
        targets=args.targets, input=args.input, dtype=args.dtype, training=args.training, execution=args.execution,
        name=args.name, headroom=args.headroom, force=args.force, dry_run=args.dry_run, pyproject=args.pyproject,
    )  # fmt: skip
    return run_init(request, _out(), _err())


def _explain(args: argparse.Namespace) -> int:
    from pytest_flopbudget._cli.explain import ExplainRequest, run_explain

    request = ExplainRequest(
        target=args.target, vs=args.vs, input=args.input, dtype=args.dtype, dims=args.dim, format=args.format,
        per_layer=args.per_layer, pyproject=args.pyproject,
    )  # fmt: skip
    return run_explain(request, _out())


def _mfu(args: argparse.Namespace) -> int:
    from pytest_flopbudget._cli.mfu import MfuRequest, run_mfu

    request = MfuRequest(
        target=args.target, input=args.input, dtype=args.dtype, dims=args.dim, format=args.format, out=args.out,
        pyproject=args.pyproject,
    )  # fmt: skip
    return run_mfu(request, _out())


def _diff(args: argparse.Namespace) -> int:
    from pytest_flopbudget._cli.diff import run_diff

    metric = by_name(args.metric) if args.metric else None
    return run_diff(
        pyproject=args.pyproject, names=args.names, out=_out(), err=_err(), format=args.format, metric=metric,
        output=args.output,
    )  # fmt: skip


def _merge(args: argparse.Namespace) -> int:
    from pytest_flopbudget._cli.merge import run_merge

    return run_merge(paths=args.paths, reports=args.report, out=_out(), err=_err())


def _comment(args: argparse.Namespace) -> int:
    from pytest_flopbudget._cli.comment import run_comment

    return run_comment(bodies=args.bodies, titles=args.title, footer=args.footer, out=_out(), timeout_s=args.timeout)


def _out() -> Any:
    """stdout for a command: every line through `safe_text` (names from models cannot start workflow commands)."""
    return _CommandStream(sys.stdout, "standard output")


def _err() -> Any:
    return _CommandStream(sys.stderr, "standard error")


class _CommandStream(SafeStream):
    """A standard stream whose write errors (`> /dev/full`: no space left) are one `error:` line naming the
    stream, not an internal error; a reader that went away (`| head`) is still a `BrokenPipeError`."""

    def __init__(self, stream: Any, name: str) -> None:
        super().__init__(stream)
        self._name = name

    def write(self, text: str) -> int:
        try:
            return super().write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputError(f"cannot write to {self._name}: {exc.strerror or exc}") from None

    def flush(self) -> None:
        try:
            super().flush()
        except BrokenPipeError:
            raise
        except ValueError:  # closed by the caller's own code: nothing left to flush
            pass
        except OSError as exc:
            raise OutputError(f"cannot write to {self._name}: {exc.strerror or exc}") from None


class OutputError(FlopBudgetError):
    """Standard output or error cannot be written (a full disk or device): exit status 2."""


# -- helpers -------------------------------------------------------------------------------------------------------


def _tokens(text: str) -> int:
    try:
        tokens = int(text)
    except ValueError:
        tokens = 0
    if tokens < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of new tokens: give a whole number >= 1")
    if generate_problem(tokens) is not None:
        raise argparse.ArgumentTypeError(str(generate_problem(tokens)))
    return tokens


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r} is not a time: give a number of seconds, more than 0, at most 3600")
    return seconds


def _depth(text: str) -> int | None:
    if text.strip().lower() == "all":
        return None
    try:
        depth = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a depth: give a whole number >= 0 or 'all'") from None
    if depth < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a depth: give a whole number >= 0 or 'all'")
    return depth


def _fail(lines: Sequence[str], status: int = 2) -> int:
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()  # what was printed before the error stays before it when both go to one pipe
    for line in lines:
        sys.stderr.write(safe_text(f"{PROG}: error: {line}") + "\n")
    return status


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
