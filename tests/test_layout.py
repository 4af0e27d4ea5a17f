"""The layout follows the data flow and nothing imports back up: the stages before the answer (corpus, index,
retrieval) never import the answer stage or a face, not even lazily or for types; rag_chain reaches the CLI only
when its own `main` runs."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LATER = {"answer", "rag_chain", "cli", "bot"}  # the answer stage and the faces


def _imported(path: Path) -> set[str]:
    """The top-level names of every module `path` imports, wherever the import statement is."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("stage", ["corpus", "index", "retrieval"])
def test_a_stage_imports_nothing_after_it(stage: str) -> None:
    back_up = {
        str(path.relative_to(ROOT)): sorted(_imported(path) & LATER) for path in sorted((ROOT / stage).rglob("*.py"))
    }
    assert {path: names for path, names in back_up.items() if names} == {}


def test_rag_chain_loads_the_cli_only_when_run() -> None:
    code = "import sys, rag_chain; print('cli' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False"]
