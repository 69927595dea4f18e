"""A real notebook, run by nbclient in a real IPython kernel (without ipywidgets, like a fresh
Jupyter): `progress=` works, `r.plot()` shows a picture inline, and a list of results is one
table (HTML and Markdown) — not DuckDB's InvalidInputException, a Figure's repr, a list's repr."""

from __future__ import annotations

import pathlib

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")

ROOT = pathlib.Path(__file__).resolve().parents[1]

SETUP = f"""
import os, sys, warnings
os.environ['PCOR_SQL_LEDGER'] = ':memory:'  # nothing written to the user's ledger
sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / "client")!r}]

class NoWidgets:  # a kernel as Jupyter starts it, without ipywidgets (DuckDB then refuses its progress bar)
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "ipywidgets":
            raise ImportError("no ipywidgets here")

sys.meta_path.insert(0, NoWidgets())
warnings.simplefilter("ignore")
import duckdb, pcor_sql
con = duckdb.connect()
pcor_sql.load_dataset(con, "salaries")
"""
CELLS = [
    SETUP,
    "seen = []\n"
    "r = pcor_sql.explain_outlier(con, 'SELECT salary FROM salaries WHERE id = 42', verifier='grubbs', epsilon=0.2,\n"
    "                             progress=lambda done, total: seen.append((done, total)))\n"
    "print(len(seen) > 0, seen[-1][0] == seen[-1][1])",
    "r.plot()",
    "pcor_sql.explain_outliers(con, 'SELECT salary FROM salaries WHERE id IN (42, 171)', verifier='grubbs',\n"
    "                          epsilon=0.2)",
    "pcor_sql.sql(con, \"EXPLAIN OUTLIER SELECT salary FROM salaries WHERE id IN (42, 171) "
    "USING grubbs WITH (epsilon = 0.2)\")",
]


@pytest.mark.slow  # a kernel and four releases: ~10 s
def test_a_notebook_shows_progress_a_picture_and_tables(tmp_path):
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [c.outputs for c in notebook.cells]
    errors = [o for cell in outputs for o in cell if o.output_type == "error"]
    assert not errors, [(e.ename, e.evalue) for e in errors]
    assert [o.text for o in outputs[1] if o.output_type == "stream" and o.name == "stdout"] == ["True True\n"]
    [picture] = [o for o in outputs[2] if o.output_type == "execute_result"]
    assert picture.data["image/png"], picture.data.keys()
    for cell in outputs[3:]:
        [table] = [o for o in cell if o.output_type == "execute_result"]
        html, markdown = table.data["text/html"], table.data["text/markdown"]
        assert html.count("<table>") == 1 and html.count("<tr>") == 3 and "id = 171" in html
        assert markdown.count("\n| 1 | ") == 1 and "id = 42" in markdown
