"""SQL text as DuckDB renders it, rewritten for Spark SQL.

Requests hold SQL that DuckDB's parser rendered (relation, metric, selector) and the builders
quote names DuckDB's way, so the Spark engine runs the same text after a lexical rewrite on
the one tokenizer (`pcor_sql.sqltext.tokens`); nothing is parsed twice. The differences that
matter for that text:

- identifiers: DuckDB quotes with "..." (doubling "), Spark with `...` (doubling `);
- string literals: both write 'it''s', but Spark also reads backslash escapes inside them,
  so a backslash in a value must be doubled to mean itself;
- E'...' escape strings and $tag$ strings are DuckDB's own: refused, with the fix.

- `system.main.count(...)`: the builders qualify DuckDB's built-in functions so that a user
  macro of the same name cannot run instead; Spark has no such catalog, so the qualifier goes.

Everything else (keywords, numbers, operators, comments) passes through unchanged; DuckDB's
rendering of a query uses CAST(...) rather than `::`, so the two dialects agree on it.
"""

from __future__ import annotations

from pcor_sql.errors import UserError
from pcor_sql.sqltext.quoting import type_exact
from pcor_sql.sqltext.tokens import PUNCT, QUOTED_IDENT, STRING, WORD, tokenize, unquote_identifier


@type_exact
def spark_identifier(name: str) -> str:
    """`name` as a Spark identifier: backquoted, embedded backquotes doubled."""
    if not isinstance(name, str) or not name:
        raise UserError(f"invalid column name {name!r}", "name a column of the relation")
    return "`" + name.replace("`", "``") + "`"


@type_exact
def spark_string(value: str) -> str:
    """A Spark string literal for `value`: quotes doubled and backslashes escaped."""
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


@type_exact
def spark_sql(text: str) -> str:
    """`text`, DuckDB SQL, with its quoted identifiers and string literals in Spark's form."""
    out = []
    tokens = list(tokenize(text))
    skip = 0
    for i, tok in enumerate(tokens):
        if skip:
            skip -= 1
            continue
        if _builtin_qualifier(tokens, i):
            skip = 3
            continue
        if tok.kind == QUOTED_IDENT:
            out.append(spark_identifier(unquote_identifier(tok)))
        elif tok.kind == STRING:
            if not tok.text.startswith("'"):
                raise UserError(
                    f"the string {tok.text[:20]!r} is written in a form only DuckDB reads",
                    "write it as a plain quoted string: 'text' (quotes doubled)",
                )
            out.append(spark_string(tok.text[1:-1].replace("''", "'")))
        else:
            out.append(tok.text)
    return "".join(out)


def _builtin_qualifier(tokens: list, i: int) -> bool:
    """Whether tokens i..i+3 are `system.main.` written together before a function's name and
    its opening bracket (`system.main.count(`)."""
    if i + 5 >= len(tokens):
        return False
    run = tokens[i:i + 6]
    return (run[0].kind == WORD and run[0].text.lower() == "system" and run[1].kind == PUNCT and run[1].text == "."
            and run[2].kind == WORD and run[2].text.lower() == "main" and run[3].kind == PUNCT and run[3].text == "."
            and run[4].kind == WORD and run[5].kind == PUNCT and run[5].text == "("
            and all(a.end == b.start for a, b in zip(run, run[1:])))
