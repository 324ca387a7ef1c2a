r"""The ``prefbo`` command line.

- ``prefbo demo [ARGS]``: the Branin EUBO demo (:mod:`prefbo.loop.demo`).
- ``prefbo session new FILE --space space.json [--strategy ...]``: start an
  interactive session in the terminal, logged durably to ``FILE``.
- ``prefbo session resume FILE``: continue a session from its log.
- ``prefbo serve study.toml`` / ``prefbo serve --demo``: a study with people
  in a browser (:mod:`prefbo.serve.cli`; needs ``pip install prefbo[serve]``).

A session holds its log's lock while it runs (one writer per log, see
:mod:`prefbo.loop.session`). Bad arguments, a missing, locked or damaged log
and file errors end the command with ``prefbo: error: ...`` and exit
status 2.

The benchmark scripts are not part of the installed package; run them from
a source checkout as ``python benchmarks/NAME.py``.

In a session each question shows the options with the variables' names; type
``1``..``q`` to choose, ``u`` to undo the last answer (an ``undo`` record is
appended, the log is never rewritten) or ``q`` to quit. After each answer the
current best design and the comparison-graph findings
(:func:`prefbo.data.graph.comparison_graph_summary`) are printed.

``space.json``: ``{"variables": [{"name": "sweetness", "lower": 0, "upper":
10}, ...]}`` for a box; entries with a ``"type"`` give the other kinds of
:mod:`prefbo.space` (``"continuous"`` with ``"log": true``, ``"integer"``,
``"ordinal"``, ``"categorical"``, ``"items"`` (an item pool)), e.g. ``{"type":
"categorical", "name": "font", "choices": ["serif", "sans"]}``. A box is
shown with its variables' values; a space with each design's values by name.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from prefbo.data.graph import ComparisonGraphWarning, comparison_graph_summary
from prefbo.exceptions import InputDataError, PrefboError
from prefbo.loop import demo
from prefbo.loop.model_kinds import model_kind_names
from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.loop.session import SessionLogWarning
from prefbo.loop.strategies import strategy_names
from prefbo.space import Continuous, Space

try:  # the serve extra (starlette, uvicorn, sqlalchemy, jinja2) is optional
    from prefbo.serve import cli as serve_cli
except ImportError as _missing:  # pragma: no cover - with the extra installed
    serve_cli = None
    SERVE_MISSING = str(_missing)


def read_space(path: str | Path) -> tuple[list[str], list[list[float]]]:
    r"""Variable names and ``2 x d`` bounds ``[lower, upper]`` from a JSON file.

    Args:
        path: A file ``{"variables": [{"name", "lower", "upper"}, ...]}``.

    Returns:
        ``(names, bounds)``.
    """
    try:
        variables = json.loads(Path(path).read_text())["variables"]
        names = [str(v["name"]) for v in variables]
        lower = [float(v["lower"]) for v in variables]
        upper = [float(v["upper"]) for v in variables]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputDataError(
            f"--space {str(path)!r} must be a JSON file "
            '{"variables": [{"name": "x", "lower": 0, "upper": 1}, ...]}; '
            f"reading it failed: {type(e).__name__}: {e}"
        ) from e
    if not names or any(lo >= hi for lo, hi in zip(lower, upper)):
        raise InputDataError(
            f"--space {str(path)!r} needs at least one variable and lower < upper "
            f"for each; got lower={lower}, upper={upper}."
        )
    return names, [lower, upper]


def _fmt(names: list[str], x) -> str:
    return ", ".join(f"{n}={v:.4g}" for n, v in zip(names, x.tolist()))


def _show(opt: PreferentialOptimizer, names: list[str], x) -> str:
    r"""A design as the person sees it: the box's values, or the space's."""
    if opt.space is None:
        return _fmt(names, x)
    design = opt.space.decode(x)[0]
    return ", ".join(
        f"{n}={v:.4g}" if isinstance(v, float) else f"{n}={v}"
        for n, v in design.items()
    )


def read_typed_space(path: str | Path) -> Space | None:
    r"""The :class:`~prefbo.space.Space` of a ``space.json`` whose variables
    name a ``"type"``; ``None`` where none does (a box: :func:`read_space`,
    as before the other kinds existed).

    Raises:
        InputDataError: The file is not JSON, or a typed entry is invalid.
    """
    space = Space.read(path) if _typed(path) else None
    if space is not None and all(
        type(v) is Continuous and not v.log for v in space.variables
    ):
        return None  # continuous on a linear scale only: a box
    return space


def _typed(path: str | Path) -> bool:
    try:
        data = json.loads(Path(path).read_text())
        return any("type" in v for v in data["variables"])
    except (OSError, ValueError, KeyError, TypeError):
        return False  # read_space names what is wrong


def run_session(opt: PreferentialOptimizer, stdin: TextIO, stdout: TextIO) -> int:
    r"""The interactive loop over ``stdin``/``stdout``; returns an exit status."""
    names = opt.metadata.get("names") or [f"x{i}" for i in range(opt.dim)]

    def say(*lines: str) -> None:
        for line in lines:
            print(line, file=stdout, flush=True)

    say(f"{len(opt.history)} answer(s) so far; log: {opt.log_path}")
    while True:
        X = opt.ask()
        say("", f"question {len(opt.history) + 1}: which do you prefer?")
        say(*(f"  [{i + 1}] {_show(opt, names, x)}" for i, x in enumerate(X)))
        say(f"choose 1..{opt.q}, u = undo, q = quit")
        line = stdin.readline()
        if not line:  # end of input: as quit
            say("end of input; session saved.")
            return 0
        cmd = line.strip().lower()
        if cmd == "q":
            say("session saved.")
            return 0
        if cmd == "u":
            if not opt.history:
                say("nothing to undo.")
                continue
            opt.undo()
            say("last answer withdrawn.")
        elif cmd.isdigit() and 1 <= int(cmd) <= opt.q:
            opt.tell(int(cmd) - 1)
        else:
            say(f"unrecognised answer {cmd!r}.")
            continue
        if not opt.history:
            continue
        x, mean, sd = opt.best()
        say(f"current best: {_show(opt, names, x)}  (utility {mean:.3g} ± {sd:.2g})")
        designs, comps = opt.data()
        summary = comparison_graph_summary(comps, designs.shape[0], warn=False)
        say(
            f"comparison graph: {summary.num_components} component(s), algebraic "
            f"connectivity {summary.algebraic_connectivity:.3g}"
        )
        say(*(f"note: {m}" for m in summary.messages))


def _session(args: argparse.Namespace, stdin: TextIO, stdout: TextIO) -> int:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SessionLogWarning)
        warnings.simplefilter("ignore", ComparisonGraphWarning)
        if args.action == "new":
            space = read_typed_space(args.space)
            if space is None:
                names, bounds = read_space(args.space)
                where: Space | list = bounds
                metadata = {"names": names}
            else:
                where, metadata = space, {"names": space.names}
            opt = PreferentialOptimizer(
                where,
                model=args.model,
                strategy=args.strategy,
                q=args.q,
                keep_winner=args.keep_winner,
                seed=args.seed,
                initial_random=args.initial_random,
                log_path=args.file,
                metadata=metadata,
            )
        else:
            opt = PreferentialOptimizer.resume(args.file)
    for w in caught:
        if issubclass(w.category, SessionLogWarning):
            print(f"warning: {w.message}", file=stdout, flush=True)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    with opt:  # holds the log's lock until the session ends
        return run_session(opt, stdin, stdout)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="prefbo", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run the Branin EUBO demo", add_help=False)
    sub.add_parser(
        "serve", help="a study in the browser (prefbo serve -h)", add_help=False
    )
    s = sub.add_parser("session", help="an interactive preference session")
    ss = s.add_subparsers(dest="action", required=True)
    new = ss.add_parser("new", help="start a session logged to FILE")
    new.add_argument("file", type=Path)
    new.add_argument("--space", type=Path, required=True, help="space.json")
    new.add_argument("--model", choices=model_kind_names(), default="ep")
    new.add_argument("--strategy", choices=strategy_names(), default="eubo")
    new.add_argument("--q", type=int, default=2, help="options per question")
    new.add_argument("--keep-winner", action="store_true")
    new.add_argument("--seed", type=int, default=0)
    new.add_argument("--initial-random", type=int, default=2)
    res = ss.add_parser("resume", help="continue the session logged in FILE")
    res.add_argument("file", type=Path)
    return p


def main(
    argv: Sequence[str] | None = None,
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
) -> int:
    r"""Run the command line; returns the exit status.

    Args:
        argv: Arguments without the program name (default ``sys.argv[1:]``).
        stdin: Input of interactive sessions (default ``sys.stdin``).
        stdout: Output of interactive sessions (default ``sys.stdout``).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    args, rest = _parser().parse_known_args(argv)
    try:
        if args.command == "demo":
            demo.main(rest)
            return 0
        if args.command == "serve":
            if serve_cli is None:
                print(
                    "prefbo: error: prefbo serve needs the serve extra: pip install "
                    f"'prefbo[serve]' ({SERVE_MISSING}).",
                    file=sys.stderr,
                )
                return 2
            return serve_cli.main(rest)
        if rest:
            _parser().error(f"unrecognized arguments: {' '.join(rest)}")
        return _session(args, stdin, stdout)
    except (PrefboError, OSError) as e:  # a missing or unwritable file, too
        print(f"prefbo: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
