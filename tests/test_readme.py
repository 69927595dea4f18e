"""The README's Python examples run as written (on the bundled data)."""

from __future__ import annotations

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)


def test_the_python_examples_run_in_order(capsys):
    blocks = python_blocks()
    assert len(blocks) >= 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102 — our own documentation
    assert namespace["explanation"].context and namespace["contexts"][0].size > 0
    assert "valid contexts of" in capsys.readouterr().out
