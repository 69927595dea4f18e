"""An analyst needs no data: the client works where DuckDB cannot be imported. Run in a
subprocess whose import system refuses duckdb."""

from __future__ import annotations

import subprocess
import sys
import textwrap

BLOCK = textwrap.dedent("""
    import sys

    class NoDuckDB:
        def find_spec(self, name, path=None, target=None):
            if name == "duckdb" or name.startswith("duckdb."):
                raise ImportError("duckdb is blocked in this test")
            return None

    sys.meta_path.insert(0, NoDuckDB())
""")


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=60)


def test_the_block_works():
    done = run("import duckdb")
    assert done.returncode != 0 and "duckdb is blocked" in done.stderr


def test_the_client_imports_and_runs_without_duckdb():
    done = run("""
        import pcor_sql
        from pcor_sql.errors import UserError
        analyst = pcor_sql.connect("http://127.0.0.1:1", "token")
        try:
            analyst.datasets()
        except UserError as exc:
            print("refused:", exc.problem)
        assert not [m for m in sys.modules if m.startswith("duckdb")]
    """)
    assert done.returncode == 0, done.stderr
    assert "refused: cannot reach the pcor-sql service" in done.stdout

