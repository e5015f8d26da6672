"""The ``paperports`` command: ``reproduce`` and ``bench`` for the methods that have landed."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import paperports
from paperports._checks import whole_number
from paperports.registry import METHODS, Method, RunContext, get_method

__all__ = ["main", "summary_table"]


def _methods_help() -> str:
    return "\n".join(f"  {m.name:18} {m.title}" for m in METHODS.values())


def _selected(name: str) -> list[Method]:
    return list(METHODS.values()) if name == "all" else [get_method(name)]


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "method",
        nargs="?",
        default="all",
        choices=[*METHODS, "all"],
        help="the method to run (default: all)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars or status lines")
    p.add_argument("--debug", action="store_true", help="show full tracebacks on errors")


_positive, _seed = whole_number(1), whole_number(0)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``paperports`` command."""
    methods = f"methods:\n{_methods_help()}"
    parser = argparse.ArgumentParser(
        prog="paperports",
        description="Reproduce and benchmark five classic papers as plugins of their ecosystems.",
        epilog=methods,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=paperports.__version__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="{reproduce,bench}")

    rep = sub.add_parser(
        "reproduce",
        help="run a method's experiments and write a report beside the paper's figures",
        description="Run a method's experiments on the embedded data and write report.md, "
        "results.json and PNG plots to OUT/<method>/.",
        epilog=methods,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(rep)
    rep.add_argument(
        "--quick",
        action="store_true",
        help="the demo's budget: enough to show each paper's point, all five methods in "
        "under 10 minutes on 2 cores (the full budget takes hours)",
    )
    rep.add_argument("--out", type=Path, default=Path("reports"), help="output folder")
    rep.add_argument("--seed", type=_seed, default=0, help="base random seed (default: 0)")
    rep.add_argument(
        "--jobs",
        type=_positive,
        default=1,
        help="worker processes for the independent training runs of obsdrop, one torch "
        "thread each (default: 1, in this process); the other methods ignore it",
    )

    ben = sub.add_parser(
        "bench",
        help="time a method against its ecosystem's own implementation",
        description="Run a method's benchmarks in one process and print ours / anchor ratios "
        "(medians of repeated runs, same inputs, same thread count); write OUT/<method>.json.",
        epilog=methods,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(ben)
    ben.add_argument("--out", type=Path, default=Path("benchmarks/results"), help="output folder")
    ben.add_argument("--seed", type=_seed, default=0, help="random seed (default: 0)")
    return parser


def _run(args: argparse.Namespace) -> int:
    reports: dict[str, Path] = {}
    for method in _selected(args.method):
        if args.command == "reproduce":
            ctx = RunContext(
                out=args.out / method.name,
                quick=args.quick,
                seed=args.seed,
                quiet=args.quiet,
                jobs=args.jobs,
                command=_command(args, method),
            )
            ctx.log(f"paperports reproduce {method.name}{' --quick' if args.quick else ''} ...")
            report = method.reproduce(ctx)
            reports[method.name] = report
            print(f"{method.name}: report written to {report}")
        else:
            ctx = RunContext(
                out=args.out, seed=args.seed, quiet=args.quiet, command=_command(args, method)
            )
            ctx.log(f"paperports bench {method.name} ...")
            result = method.bench(ctx)
            result.command = ctx.command
            print(result.table())
            print(f"{method.name}: results written to {result.write(args.out)}")
    if reports:
        print(summary_table(reports))
    return 0


def summary_table(reports: dict[str, Path]) -> str:
    """What each report found beside the paper's figure (the ``"summary"`` of each
    ``results.json`` beside a ``report.md``), as aligned plain text, then the reports."""
    import json

    rows = [("method", "claim", "ours", "paper")]
    for name, report in reports.items():
        results = json.loads((report.parent / "results.json").read_text())
        for i, finding in enumerate(results.get("summary", [])):
            rows.append(
                (name if i == 0 else "", finding["claim"], finding["ours"], finding["paper"])
            )
    widths = [max(len(row[k]) for row in rows) for k in range(3)]
    lines = ["", "What each report found, beside the paper's figure:", ""]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("  ".join([*cells, row[3]]).rstrip())
    lines += ["", "Reports:", *(f"  {name:8} {report}" for name, report in reports.items())]
    return "\n".join(lines)


def _command(args: argparse.Namespace, method: Method) -> str:
    """The command line that runs ``method`` alone with ``args``' settings."""
    words = ["paperports", args.command, method.name]
    if getattr(args, "quick", False):
        words.append("--quick")
    if args.seed:
        words += ["--seed", str(args.seed)]
    if getattr(args, "jobs", 1) > 1:
        words += ["--jobs", str(args.jobs)]
    default_out = Path("reports") if args.command == "reproduce" else Path("benchmarks/results")
    if args.out != default_out:
        words += ["--out", str(args.out)]
    return " ".join(words)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``paperports`` console script."""
    args = build_parser().parse_args(argv)
    if args.debug:
        return _run(args)
    try:
        return _run(args)
    except KeyboardInterrupt:
        print("paperports: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # one clear line for the user; --debug shows the traceback
        print(f"paperports: error: {err} (run with --debug for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
