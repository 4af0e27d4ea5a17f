"""The layout follows the data flow and nothing imports back up: the stages before the answer (corpus, index,
retrieval) never import the answer stage or a face, not even lazily or for types; no two product modules import
each other, however far round (so each module is above or below each other one); rag_chain never imports the CLI
(run as a program it hands over to it)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LATER = {"answer", "rag_chain", "cli", "bot"}  # the answer stage and the faces
PRODUCT = ("config.py", "rag_chain.py", "cli.py", "bot", "ingest_adilet", "corpus", "index", "retrieval", "answer")


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


def product_modules(root: Path) -> dict[str, Path]:
    """Every product module under `root` by dotted name («index.status»; a package by its own name)."""
    modules: dict[str, Path] = {}
    for top in PRODUCT:
        for path in [root / top] if top.endswith(".py") else sorted((root / top).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module → the product modules it imports, counting every import statement wherever it is (module level, in a
    function, under `if TYPE_CHECKING:`), relative ones resolved; `from pkg import name` is pkg.name when that is a
    module, else pkg."""
    modules = product_modules(root)

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                targets += [".".join(filter(None, [base, alias.name])) for alias in node.names]
        graph[module] = {found for target in targets if (found := owner(target)) and found != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[tuple[list[str], list[str]]]:
    """Each group of modules that import each other (a strongly connected component), as one shortest cycle through
    it ([a, b, …, a]) and all its modules."""
    reach: dict[str, set[str]] = {}
    for start in graph:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        reach[start] = seen
    found, done = [], set()
    for start in sorted(graph):
        if start in done or start not in reach[start]:
            continue
        group = {m for m in reach[start] if start in reach[m]}
        done |= group
        paths = {start: [start]}
        todo = [start]
        while todo and start not in graph[todo[0]]:  # breadth first within the group, back to start
            here = todo.pop(0)
            for nxt in sorted(graph[here] & group):
                if nxt not in paths:
                    paths[nxt] = [*paths[here], nxt]
                    todo.append(nxt)
        found.append(([*paths[todo[0]], start], sorted(group)))
    return found


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    files = {
        "config.py": "",
        "cli.py": "import rag_chain\n",
        "rag_chain.py": "from index import status\n",
        "index/__init__.py": "",
        "index/status.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .build import X\n",
        "index/build.py": "def f():\n    from ..corpus.text import clean\n    from . import documents\n"
        "    from .. import config\n",
        "index/documents.py": "import cli\nfrom retrieval.pipeline import Retrieval\n",
        "retrieval/__init__.py": "",
        "retrieval/pipeline.py": "from corpus import text\n",
        "corpus/__init__.py": "",
        "corpus/text.py": "import os, json\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    graph = import_graph(tmp_path)
    assert graph["index.status"] == {"index.build"}
    assert graph["index.build"] == {"config", "corpus.text", "index.documents"}
    assert graph["index.documents"] == {"cli", "retrieval.pipeline"}
    assert graph["retrieval.pipeline"] == {"corpus.text"}
    assert graph["corpus.text"] == set()
    circle = ["cli", "rag_chain", "index.status", "index.build", "index.documents", "cli"]
    assert cycles(graph) == [(circle, sorted(circle[:-1]))]


def test_no_two_product_modules_import_each_other() -> None:
    """Every arrow points down the data flow: a cycle, even through a lazy or a type-only import, is a place where
    a reader cannot tell which module owns what."""
    found = cycles(import_graph(ROOT))
    assert not found, "import cycles between product modules:\n" + "\n".join(
        f"{' → '.join(cycle)}   (the circle: {', '.join(group)})" for cycle, group in found
    )
