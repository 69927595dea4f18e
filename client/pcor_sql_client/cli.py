"""`pcor-sql-remote`: an analyst's requests to a data owner's pcor-sql service, from the shell.

    export PCOR_SQL_TOKEN=...                  # the token `pcor-sql analyst add` printed for you
    export PCOR_SQL_URL=http://127.0.0.1:8000  # the service (or --url on each call)
    pcor-sql-remote datasets                                # or: pcor-sql-remote --url URL datasets
    pcor-sql-remote releasable-keys salaries --limit 20     # the keys you may ask about
    pcor-sql-remote cost salaries 42 --epsilon 0.2          # what it would charge; nothing charged
    pcor-sql-remote explain-outlier salaries 42 --epsilon 0.2 --metric salary
    pcor-sql-remote sql "EXPLAIN OUTLIER SELECT salary FROM salaries WHERE id = 42 WITH (epsilon = 0.2)"

The light client's command line (httpx only, argparse), and the one declaration of the analyst's
commands: `pcor-sql remote ...` hands its arguments to `main` here, so both spell every command,
option, output, exit code and error line alike by construction. Errors are one line on stderr,
`error: <problem> — <fix>`, exit 2 — bad arguments too, and a request that cannot reach the service.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable, Sequence, TextIO

from pcor_sql_client.errors import UserError
from pcor_sql_client.remote_analyst import RemoteAnalyst, connect
from pcor_sql_client.text import (
    TOKEN_VARIABLE,
    URL_VARIABLE,
    answer_row,
    explanation_lines,
    key_value,
    me_rows,
    point,
    releasable_title,
    sql_line,
    table_rows,
)

USER_EXIT = 2
#: The explain options sent as given when set (the service checks them).
EXPLAIN_OPTIONS = ("metric", "verifier", "search", "samples", "utility", "start", "by")
IDENTIFY_OPTIONS = ("privacy", "k")


def analyst(url: str | None) -> RemoteAnalyst:
    """The connection the environment names: the token from $PCOR_SQL_TOKEN, the URL from
    `url` or $PCOR_SQL_URL."""
    url = url or os.environ.get(URL_VARIABLE, "")
    if not url.strip():
        raise UserError("no service URL given", f"pass --url http://HOST:PORT or export {URL_VARIABLE}=http://HOST:PORT")
    token = os.environ.get(TOKEN_VARIABLE, "")
    if not token.strip():
        raise UserError(f"${TOKEN_VARIABLE} is not set",
                        f"export {TOKEN_VARIABLE}=<the token your data owner gave you (pcor-sql analyst add)>")
    return connect(url, token)


def set_options(args: argparse.Namespace, names: Sequence[str]) -> dict[str, Any]:
    return {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}


def cost_call(args: argparse.Namespace) -> tuple[str, Any, dict[str, Any]]:
    """The method, target and options `cost` previews: keys (an explanation) or --value (an answer)."""
    if bool(args.keys) == bool(args.value):
        raise UserError("cost previews an explanation (keys) or an anomaly answer (--value), one of them",
                        "e.g. `cost salaries 42 --epsilon 0.2` or `cost salaries --value salary=250000 --beta 5 "
                        "--radius 1000 --epsilon 0.5`")
    if args.keys:
        return "explain_outliers", [key_value(k) for k in args.keys], {"epsilon": args.epsilon,
                                                                        **set_options(args, EXPLAIN_OPTIONS)}
    options = {"epsilon": args.epsilon, **set_options(args, ("beta", "radius", *IDENTIFY_OPTIONS))}
    return "identify_value", point(args.value), options


# ---- output --------------------------------------------------------------------------------

def print_table(items: Sequence[dict[str, Any]], out: TextIO, title: str | None = None) -> None:
    """Plain columns, padded: `column  column` then the rows (no colours, no box)."""
    columns, rows = table_rows(items)
    cells = [[str(c) for c in columns], *[["" if v is None else str(v) for v in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    if title:
        print(title, file=out)
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip(), file=out)


def show(items: Sequence[dict[str, Any]], fmt: str, out: TextIO, title: str | None = None) -> None:
    if fmt == "json":
        for item in items:
            print(json.dumps(item, ensure_ascii=False), file=out)
    else:
        print_table(items, out, title)


def run_command(args: argparse.Namespace, out: TextIO) -> None:
    with analyst(args.url) as remote:
        if args.command == "datasets":
            show(remote.datasets(), args.format, out)
        elif args.command == "me":
            found = remote.me()
            show([found] if args.format == "json" else me_rows(found), args.format, out)
        elif args.command == "history":
            show(remote.history(limit=args.limit, before=args.before), args.format, out)
        elif args.command == "releasable-keys":
            page = remote.releasable_keys(args.dataset, limit=args.limit, offset=args.offset)
            if args.format == "json":
                show([page], "json", out)
            else:
                show([{"key": k} for k in page["keys"]], "table", out, title=releasable_title(page))
        elif args.command == "cost":
            method, target, options = cost_call(args)
            show([remote.cost(method, args.dataset, target, **options).as_dict()], args.format, out)
        elif args.command == "explain-outlier":
            results = remote.explain_outliers(args.dataset, [key_value(k) for k in args.keys], epsilon=args.epsilon,
                                              **set_options(args, EXPLAIN_OPTIONS))
            items = [r.as_dict() for r in results]
            if args.format == "json":
                show(items, "json", out)
            elif args.format == "sql":
                for item in items:
                    print(sql_line(item), file=out)
            else:
                print("\n\n".join("\n".join(explanation_lines(item)) for item in items), file=out)
        elif args.command == "sql":
            results = remote.sql(args.statement)
            items = [r.as_dict() for r in results]
            if args.format == "json":
                show(items, "json", out)
            elif items and all("anomaly" in item for item in items):
                show([answer_row(item) for item in items], "table", out,
                     title="\n".join(f"{r.summary}" for r in results))
            else:
                print("\n\n".join("\n".join(explanation_lines(item)) for item in items), file=out)
        elif args.command == "identify-anomaly":
            answer = remote.identify_value(args.dataset, point(args.value), beta=args.beta, radius=args.radius,
                                           epsilon=args.epsilon, **set_options(args, IDENTIFY_OPTIONS))
            item = answer.as_dict()
            show([item] if args.format == "json" else [answer_row(item)], args.format, out,
                 title=f"{answer.summary}\n{answer.privacy_summary}".strip())


# ---- the parser ----------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    """argparse whose bad-argument error is the project's one line (`error: <problem> — <fix>`,
    exit 2) instead of the usage block; subcommands inherit it (argparse makes them of this class)."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        self.exit(USER_EXIT, f"error: {message} — see `{self.prog} --help`\n")


def _ascii_lower(text: str) -> str:
    """A fixed value in any ASCII case (`JSON`), nothing else folded — the spelling rule of every
    fixed-value option of pcor-sql (docs/option-spelling.md)."""
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in text)


def _count(low: int, high: int | None = None) -> Callable[[str], int]:
    """An integer option within [low, high], checked before any request is sent."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low or (high is not None and value > high):
            bound = f"from {low} to {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"{value} is not {bound}")
        return value
    return parse


def _explain_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metric", help="One of the dataset's metrics (default: its first).")
    p.add_argument("--verifier", metavar="SPEC", help="Outlier test with options, e.g. 'lof(k=10)' or grubbs.")
    p.add_argument("--search", help="Search over contexts, e.g. explore.")
    p.add_argument("--samples", type=int, help="Samples of the search.")
    p.add_argument("--utility", help="population or overlap.")
    p.add_argument("--start", metavar="PREDICATE", help="Starting context, e.g. \"dept IN ('a', 'b')\".")
    p.add_argument("--by", metavar="A,B", help="Context attributes among the dataset's (default: all of them).")


def _identify_options(p: argparse.ArgumentParser, *, required: bool) -> None:
    mark = " [required]" if required else ""
    p.add_argument("--value", action="append", metavar="METRIC=NUMBER", required=required,
                   help=f"The point asked about, e.g. salary=250000 (repeat per metric).{mark}")
    p.add_argument("--beta", type=float, required=required,
                   help=f"β: at most β records within r (itself included) make an anomaly.{mark}")
    p.add_argument("--radius", type=float, required=required, help=f"r: the ball radius.{mark}")
    p.add_argument("--privacy", help="sp or dp.")
    p.add_argument("--k", type=int, help="k of (ε, k)-sensitive privacy.")


#: Each command's example, printed under its --help (`{prog}` is the command line's name).
EXAMPLES = {
    "datasets": "{prog} datasets --url http://127.0.0.1:8000",
    "me": "{prog} me --url http://127.0.0.1:8000",
    "history": "{prog} history --url http://127.0.0.1:8000 --limit 20 --format json",
    "releasable-keys": "{prog} releasable-keys salaries --limit 20 --url http://127.0.0.1:8000",
    "explain-outlier": "{prog} explain-outlier salaries 42 --epsilon 0.2 --metric salary --url http://127.0.0.1:8000",
    "identify-anomaly": "{prog} identify-anomaly salaries --value salary=250000 --beta 5 --radius 1000 "
                        "--epsilon 0.5 --url http://127.0.0.1:8000",
    "sql": "{prog} sql \"EXPLAIN OUTLIER SELECT salary FROM salaries WHERE id = 42 WITH (epsilon = 0.2)\"",
    "cost": "{prog} cost salaries 42 43 --epsilon 0.2 --url http://127.0.0.1:8000",
}
_FORMAT_WORDS = {("table", "json"): "table or json (JSON Lines)", ("table", "json", "sql"): "table, json (JSON Lines) or sql"}


def parser(prog: str = "pcor-sql-remote") -> argparse.ArgumentParser:
    """The analyst's commands, declared once: `pcor-sql-remote` and `pcor-sql remote` (`prog`)."""
    top = _Parser(
        prog=prog,
        description=f"An analyst's requests to a pcor-sql service (pcor-sql serve). The token is read from "
        f"${TOKEN_VARIABLE}, the URL from --url or ${URL_VARIABLE}.",
        epilog=f"Example:\n  {prog} --url http://127.0.0.1:8000 datasets\n  {prog} COMMAND --help",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    url_help = f"The service's URL, e.g. http://127.0.0.1:8000 (default ${URL_VARIABLE}); before or after the command."
    top.add_argument("--url", default=None, help=url_help)
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: a command's --url left out keeps the one given before the command (argparse would
    # otherwise write the subparser's default None over it).
    common.add_argument("--url", default=argparse.SUPPRESS, help=url_help)
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, text: str, formats: tuple[str, ...] = ("table", "json")) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[common], help=text, description=text,
                           epilog="Example:\n  " + EXAMPLES[name].format(prog=prog),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("--format", type=_ascii_lower, choices=formats, default="table",
                       help=f"{_FORMAT_WORDS[formats]} (default: table).")
        return p

    dataset_help = f"A registered dataset (see `{prog} datasets`)."
    command("datasets", "The registered datasets: key, metrics, attributes and their domains.")
    command("me", "Your quotas and what you have spent, per privacy notion (never added across notions).")
    history = command("history", "Your own requests: when, what, cost and outcome (the most recent page).")
    history.add_argument("--limit", type=_count(1, 1000), metavar="N",
                         help="The N most recent requests (default 100, at most 1000).")
    history.add_argument("--before", metavar="RELEASE_ID",
                         help="Only requests asked before this one (a release_id of an earlier page: page backwards).")
    keys = command("releasable-keys", "The keys of a dataset you may ask about by key (public by registration).")
    keys.add_argument("dataset", help=dataset_help)
    keys.add_argument("--limit", type=_count(1, 1000), metavar="N", help="At most N keys (default 100, at most 1000).")
    keys.add_argument("--offset", type=_count(0), metavar="M", help="Skip the first M keys (page on with M + N).")
    explain = command("explain-outlier", "A private context in which each record is an outlier; each key costs ε, "
                      "charged by the service before it reads a row.", ("table", "json", "sql"))
    explain.add_argument("dataset", help=dataset_help)
    explain.add_argument("keys", nargs="+", metavar="KEY", help="Releasable key(s) of the record(s).")
    explain.add_argument("--epsilon", type=float, required=True, help="Privacy cost ε of each answer. [required]")
    _explain_options(explain)
    identify = command("identify-anomaly", "A private bit: is this point a (β, r)-anomaly of the data? It costs ε, "
                       "charged before any row is read.")
    identify.add_argument("dataset", help=dataset_help)
    identify.add_argument("--epsilon", type=float, required=True, help="Privacy cost ε of the answer. [required]")
    _identify_options(identify, required=True)
    statement = command("sql", "One EXPLAIN OUTLIER or IDENTIFY ANOMALY statement, run as the request it spells "
                               "(each key costs its ε).")
    statement.add_argument("statement", help="e.g. \"EXPLAIN OUTLIER SELECT salary FROM salaries WHERE id = 42 "
                                             "WITH (epsilon = 0.2)\"")
    cost = command("cost", "What a request would charge (explain: keys; identify: --value), read from the request "
                           "alone: nothing charged, no row read.")
    cost.add_argument("dataset", help=dataset_help)
    cost.add_argument("keys", nargs="*", metavar="KEY", help="The keys of an explain-outlier request.")
    cost.add_argument("--epsilon", type=float, required=True, help="Privacy cost ε of each answer. [required]")
    _explain_options(cost)
    _identify_options(cost, required=False)
    return top


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None,
         err: Callable[[str], Any] | None = None, prog: str = "pcor-sql-remote") -> int:
    """Run one command; return the exit code (0, or 2 with one `error:` line on stderr). `prog`
    names the command line in help and errors (`pcor-sql remote` passes its own name)."""
    try:
        args = parser(prog).parse_args(argv)
    except SystemExit as exc:  # --help (0) or a bad argument (2, its one line already written)
        return exc.code if isinstance(exc.code, int) else USER_EXIT
    try:
        run_command(args, out or sys.stdout)
    except UserError as exc:
        (err or (lambda text: print(text, file=sys.stderr)))(f"error: {exc}")
        return getattr(exc, "exit_code", USER_EXIT)
    except KeyboardInterrupt:
        return 130
    return 0


def run() -> None:
    """The console script."""
    sys.exit(main())
