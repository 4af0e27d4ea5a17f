"""The docs cannot drift from the code: every command the README and docs/*.md show still runs as written.

Which lines are commands: every line of every fenced block, except blocks tagged `text` (program output quoted as
it prints it) and `python` (Python code), and every one-line inline code span, in which one of these occurs:
`python -m MODULE …` (any path to a python: `.venv/bin/python`, `ExecStart=/srv/…/python`), `python FILE.py …`,
`bash scripts/….sh`, `.ci/run`. A command ends at a shell operator (`&&`, `|`, `>`, `;`) or a `#` comment; leading
`VAR=value` and `nice -n N` do not matter.

What is checked, with the real argparse of each entry point (`--help` in a subprocess, once per entry point): a
project module or script exists; the subcommand it names is one its `--help` lists; every option it uses is listed
by the `--help` of the parser that reads it (before the subcommand: the program's, after it: the subcommand's).
Modules of other projects (pytest, mypy) must be importable, and the project files a line names must exist. Besides:
every relative link between the pages resolves (file and #anchor), every `scripts/…`, `bench/…`, `tests/…` file and
every package module (`retrieval/verdict.py`) the pages name exists, the README's test command is what `.ci/run`
runs, and the README stays short.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 160
SKIPPED_BLOCKS = {"text", "python"}
PYTHONS = {"python", "python3", "python3.11"}
OPERATORS = {"&&", "||", "|", ";", "&", ">", ">>", "<", ">&", "2>", "2>&1"}
PACKAGES = ("ingest_adilet", "corpus", "index", "retrieval", "answer", "bot", "bench", "scripts", "tests")


@dataclass(frozen=True)
class Command:
    """One command a page shows: where, what runs (`python -m X`, `python X.py`, `bash X.sh`, `.ci/run`), its args."""

    where: str
    kind: str  # "module", "script", "bash", "ci"; "unparsed" for a line that is not valid shell
    target: str
    args: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.where}: {self.kind} {self.target} {' '.join(self.args)}"


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _blocks(path: Path) -> tuple[list[tuple[int, str, str]], list[tuple[int, str]]]:
    """(line number, block tag, line) of every line in a fenced block, and (line number, line) of every other line."""
    fenced: list[tuple[int, str, str]] = []
    prose: list[tuple[int, str]] = []
    tag: str | None = None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fence = re.match(r"^\s*```(\S*)\s*$", line)
        if fence:
            tag = fence.group(1) if tag is None else None
        elif tag is not None:
            fenced.append((number, tag, line))
        else:
            prose.append((number, line))
    return fenced, prose


def _commands_in(text: str, where: str) -> list[Command]:
    """The commands in one line of shell (see the module's docstring for the rule)."""
    if not re.search(r"python\S*\s+(-m\s|\S+\.py)|bash\s+\S+\.sh|\.ci/run", text):
        return []
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        tokens = list(lexer)
    except ValueError as error:  # reported by the test of this command, with its place
        return [Command(where, "unparsed", f"({error})", (text,))]
    found = []
    for i, token in enumerate(tokens):
        rest = tokens[i + 1 :]
        cut = next((j for j, t in enumerate(rest) if t in OPERATORS), len(rest))
        if token.rsplit("/", 1)[-1] in PYTHONS and rest:
            if rest[0] == "-m" and len(rest) > 1:
                found.append(Command(where, "module", rest[1], tuple(rest[2:cut])))
            elif rest[0].endswith(".py"):
                found.append(Command(where, "script", rest[0], tuple(rest[1:cut])))
        elif token == "bash" and rest and rest[0].endswith(".sh"):
            found.append(Command(where, "bash", rest[0], tuple(rest[1:cut])))
        elif token.endswith(".ci/run"):
            found.append(Command(where, "ci", token, ()))
    return found


def doc_commands() -> list[Command]:
    commands = []
    for page in PAGES:
        fenced, prose = _blocks(page)
        for number, tag, line in fenced:
            if tag not in SKIPPED_BLOCKS:
                commands += _commands_in(line, f"{_rel(page)}:{number}")
        for number, line in prose:
            for span in re.findall(r"`([^`]+)`", line):
                commands += _commands_in(span, f"{_rel(page)}:{number}")
    return commands


COMMANDS = doc_commands()


def _is_project(module: str) -> bool:
    """A module of this project (its top-level package or module is in the repository), not pytest's or mypy's."""
    top = ROOT / module.split(".")[0]
    return top.is_dir() or top.with_suffix(".py").is_file()


def _is_project_module(module: str) -> bool:
    path = ROOT / module.replace(".", "/")
    return (path / "__main__.py").is_file() or path.with_suffix(".py").is_file()


def _help_argv(command: Command, sub: str | None) -> tuple[str, ...]:
    program = ("-m", command.target) if command.kind == "module" else (command.target,)
    return (sys.executable, *program, *((sub,) if sub else ()), "--help")


def _run_help(argv: tuple[str, ...]) -> str:
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(argv[1:])} failed ({done.returncode}): {done.stderr[-2000:]}"
    return done.stdout


class Helps:
    """`--help` outputs, each run once; the first request runs every one the pages need, two at a time."""

    def __init__(self) -> None:
        self.cache: dict[tuple[str, ...], str] = {}

    def get(self, argv: tuple[str, ...]) -> str:
        if argv not in self.cache:
            self.cache[argv] = _run_help(argv)
        return self.cache[argv]

    def prefetch(self, argvs: set[tuple[str, ...]]) -> None:
        missing = sorted(argvs - self.cache.keys())
        with ThreadPoolExecutor(max_workers=3) as pool:
            for argv, text in zip(missing, pool.map(_run_help, missing), strict=True):
                self.cache[argv] = text


def _subcommands(help_text: str) -> set[str]:
    """The subcommands argparse lists under "positional arguments" (not the choices of an option)."""
    return {name for group in re.findall(r"^  \{([\w,-]+)\}", help_text, re.M) for name in group.split(",")}


def _option(token: str) -> str | None:
    if not token.startswith("-") or token == "-" or re.fullmatch(r"-\d[\d.]*", token):
        return None
    return token.split("=", 1)[0]


def _lists(help_text: str, option: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", help_text) is not None


def drift(command: Command, helps: Helps) -> list[str]:
    """What in `command` no longer matches the code (empty when it runs as written)."""
    if command.kind == "unparsed":
        return [f"the line does not parse as shell {command.target}: {command.args[0]}"]
    problems = []
    named_files = [a for a in command.args if re.match(r"(scripts|bench|tests)/\S+\.\w+$", a)]
    problems += [f"{name} does not exist" for name in named_files if not (ROOT / name).exists()]
    if command.kind in ("bash", "ci"):
        if not (ROOT / command.target).is_file():
            problems.append(f"{command.target} does not exist")
        return problems
    if command.kind == "module" and not _is_project(command.target):
        if importlib.util.find_spec(command.target.split(".")[0]) is None:
            problems.append(f"module {command.target} is not installed")
        return problems
    if command.kind == "module" and not _is_project_module(command.target):
        return [*problems, f"no module {command.target} in the project"]
    if command.kind == "script" and not (ROOT / command.target).is_file():
        return [*problems, f"{command.target} does not exist"]
    top = helps.get(_help_argv(command, None))
    subs = _subcommands(top)
    sub_at = next((i for i, a in enumerate(command.args) if not a.startswith("-") and a in subs), None)
    before = command.args if sub_at is None else command.args[:sub_at]
    for option in filter(None, map(_option, before)):
        if not _lists(top, option):
            problems.append(f"{option} is not an option of {command.target} (its --help)")
    if sub_at is not None:
        sub = command.args[sub_at]
        sub_help = helps.get(_help_argv(command, sub))
        for option in filter(None, map(_option, command.args[sub_at + 1 :])):
            if not _lists(sub_help, option):
                problems.append(f"{option} is not an option of {command.target} {sub} (its --help)")
    elif subs and command.args and not command.args[0].startswith("-"):
        problems.append(f"{command.args[0]} is not a subcommand of {command.target} ({', '.join(sorted(subs))})")
    return problems


@pytest.fixture(scope="module")
def helps() -> Helps:
    """Every `--help` the pages need, fetched at once (a few seconds each: the entry points import the stack)."""
    helps = Helps()
    project = [c for c in COMMANDS if c.kind == "script" or (c.kind == "module" and _is_project_module(c.target))]
    existing = [c for c in project if c.kind == "module" or (ROOT / c.target).is_file()]
    helps.prefetch({_help_argv(c, None) for c in existing})
    wanted = set()
    for c in existing:
        subs = _subcommands(helps.get(_help_argv(c, None)))
        wanted |= {_help_argv(c, a) for a in c.args if not a.startswith("-") and a in subs}
    helps.prefetch(wanted)
    return helps


def test_the_pages_show_commands() -> None:
    """The extraction finds the README's two commands and the docs' commands (an empty list would check nothing)."""
    targets = {(c.where.split(":")[0], c.target) for c in COMMANDS}
    assert {("README.md", "scripts/setup.sh"), ("README.md", "rag_chain"), ("README.md", "pytest")} <= targets
    assert {"ingest_adilet", "bot", "bench.abstain", "bench/bot_concurrency.py"} <= {c.target for c in COMMANDS}
    assert len(COMMANDS) > 40


@pytest.mark.parametrize("command", COMMANDS, ids=str)
def test_a_command_in_the_docs_runs_as_written(command: Command, helps: Helps) -> None:
    assert drift(command, helps) == []


def test_a_drifted_command_is_caught(helps: Helps) -> None:
    """The check itself: a renamed option, an unknown subcommand, a missing module or file each count as drift."""
    line = '.venv/bin/python -m rag_chain ask --from-dir ../shared/corpus "вопрос"  # fine'
    (good,) = _commands_in(line, "here")
    assert drift(good, helps) == []
    (renamed,) = _commands_in(line.replace("--from-dir", "--source-dir"), "here")
    assert drift(renamed, helps) == ["--source-dir is not an option of rag_chain ask (its --help)"]
    (misplaced,) = _commands_in(".venv/bin/python -m ingest_adilet index --from-dir DIR", "here")
    assert drift(misplaced, helps) == ["--from-dir is not an option of ingest_adilet index (its --help)"]
    (unknown,) = _commands_in(".venv/bin/python -m rag_chain answer 'вопрос'", "here")
    assert drift(unknown, helps) == ["answer is not a subcommand of rag_chain (ask, chat, eval)"]
    (gone,) = _commands_in("python -m bench.no_such_bench --data-dir data", "here")
    assert drift(gone, helps) == ["no module bench.no_such_bench in the project"]
    (script,) = _commands_in("bash scripts/no_such.sh && .ci/run", "here")[:1]
    assert drift(script, helps) == ["scripts/no_such.sh does not exist"]


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (word characters, spaces, hyphens kept)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    _, prose = _blocks(page)
    seen: dict[str, int] = {}
    anchors = set()
    for _, line in prose:
        heading = re.match(r"^#{1,6}\s+(.+?)\s*#*\s*$", line)
        if heading:
            slug = _slug(heading.group(1))
            anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
            seen[slug] = seen.get(slug, 0) + 1
    return anchors


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_every_relative_link_resolves(page: Path) -> None:
    _, prose = _blocks(page)
    broken = []
    for number, line in prose:
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"[a-z]+:", target):
                continue
            name, _, anchor = target.partition("#")
            linked = (page.parent / name).resolve() if name else page
            if not linked.exists():
                broken.append(f"{number}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
                broken.append(f"{number}: {target} (no heading #{anchor} in {linked.name})")
    assert broken == []


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_every_project_file_named_exists(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    named = set(re.findall(r"(?<![\w./~-])((?:scripts|bench|tests)/[\w./-]*[\w])", text))
    named |= set(re.findall(rf"(?<![\w./~-])((?:{'|'.join(PACKAGES)})/[\w/]*\w\.py)\b", text))
    named |= set(re.findall(r"(?<![\w./~-])(prompts/[\w.]+\.(?:txt|toml))", text))
    assert sorted(name for name in named if not (ROOT / name).exists()) == []


PROJECT_FILES = {
    path.name for top in PACKAGES for path in (ROOT / top).rglob("*.py") if "__pycache__" not in path.parts
} | {path.name for path in ROOT.glob("*.py")}


FILE_SUFFIXES = {"py", "json", "jsonl", "txt", "toml", "sqlite", "md", "faiss", "gz", "tar"}


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a submodule of a plain module
        return False


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_every_module_named_exists(page: Path) -> None:
    """A module named by its file alone (`html_parser.py`) is a file of the project; one named by its dotted path
    (`retrieval.verdict.small_talk`, `bot.app.build_application(...)`) imports, down to the last attribute."""
    text = page.read_text(encoding="utf-8")
    missing = sorted({name for name in re.findall(r"`(\w+\.py)`", text) if name not in PROJECT_FILES})
    tops = {*PACKAGES, "rag_chain", "config", "cli"} - {"tests", "scripts", "bench"}
    for dotted in sorted(set(re.findall(r"`((?:\w+\.)+\w+)[`(]", text))):
        parts = dotted.split(".")
        if parts[0] not in tops or parts[-1] in FILE_SUFFIXES:
            continue
        cut = next(i for i in range(len(parts), 0, -1) if _module_exists(".".join(parts[:i])))
        obj: object = importlib.import_module(".".join(parts[:cut]))
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                missing.append(dotted)
                break
            obj = getattr(obj, attr)
    assert missing == []


def test_the_readme_is_short_and_its_test_command_is_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(readme) <= README_MAX_LINES
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    tests = [line.strip() for line in readme if line.startswith("bash scripts/setup.sh") and "pytest" in line]
    assert tests == ["bash scripts/setup.sh && .venv/bin/python -m pytest -q"]
    assert tests[0] in ci
