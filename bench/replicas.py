"""Three bot replicas in webhook mode behind nginx over one PostgreSQL, answering 3-turn dialogues with the real
chain (#20): answers/s, time to answer, lost and duplicated updates, follow-ups with their context, cache hits,
memory per replica; and, with --kill, a run in which one replica is killed (SIGKILL) --kill-after seconds in.

    python -m bench.replicas --data-dir DIR --users 1 50 200 --kill

Everything is real and on 127.0.0.1: a PostgreSQL cluster of its own (tests/support/postgres.py, a fresh database
per run), three `python -m bot` processes (TELEGRAM_MODE=webhook, DATABASE_URL, METRICS_PORT; each over its own
copy of --data-dir, made afresh for each run, so nothing is written to yours and no run starts with another's
caches), Debian's nginx with deploy/nginx.conf (its upstream rewritten to the three replicas' ports) and the tests'
local Bot API server (tests/support/telegram_server.py), which posts each update to the webhook the replicas set
and posts it again, a second later, until it gets a 200, as Telegram does. No chat model is configured: the answers
are the chain's quotes of the norms (BACKGROUND_INDEX_BUILD off), which the answer cache keeps.

Each simulated user holds one dialogue of bench/data/dialogues_dev.jsonl (user n the n-th, cycling), made 3 turns
long where it has 2 by a third follow-up that needs the conversation («Куда мне обратиться с этим?», in Kazakh for
Kazakh dialogues), sending each turn once the answer to the previous one has come; users run at once. Then every
second user sends /new and asks its first question again: the answer cache's hits over the replicas' /metrics.

- time to answer: from the update entering the Bot API server to the message carrying the answer's rating buttons;
  answers/s: the dialogues' answers over the dialogue phase's wall time; "from cache": those of the dialogues'
  answers the answer cache served (their log line has no stage but the total): users holding the same dialogue
  share it, so with more users than dialogues many later turns are hits (--no-cache: every answer from the chain);
- lost / duplicated: each question sent against the answers the chat got for it (the rating button's question id
  read back in PostgreSQL's `questions`): none, or more than one;
- follow-ups with context: turns 2 and 3 whose stored exchange continues the previous turn's (`exchanges.parent_id`,
  what the bot handed the chain as the conversation); "read" of them: the chain's follow-up reading used it (the
  replicas' "…, used" log lines);
- a user whose question has no answer gives up on it when no answer at all came for --stall seconds (more than the
  60 s a dead replica's claim takes to lapse) or after --timeout, and goes on with the next turn;
- memory: each replica's VmRSS and peak (VmHWM) at the end of the run, from /proc.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.keyboards import RATE_PATTERN  # noqa: E402
from config import Settings  # noqa: E402
from tests.support.postgres import Cluster, remove_cluster, start_cluster  # noqa: E402
from tests.support.telegram_server import BotAPIServer, message_update  # noqa: E402

DIALOGUES = ROOT / "bench" / "data" / "dialogues_dev.jsonl"
THIRD_TURN = {"ru": "Куда мне обратиться с этим?", "kk": "Бұл мәселе бойынша қайда жүгінуім керек?"}
REPLICAS = 3
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
ANSWER_LINE = re.compile(r"bot\.handlers: answer (\{.*\})$", re.MULTILINE)
USED = re.compile(r"question (\d+) from user \d+ answered in .*?\((?:[^()]*?), (\d+) earlier exchanges(, used)?")


@dataclass(frozen=True)
class Dialogue:
    lang: str
    turns: tuple[str, ...]


def dialogues(path: Path = DIALOGUES) -> list[Dialogue]:
    """The dialogues, each made 3 turns long."""
    out = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                turns = tuple(row["turns"][:3])
                if len(turns) < 3:
                    turns += (THIRD_TURN[row["lang"]],) * (3 - len(turns))
                out.append(Dialogue(row["lang"], turns))
    return out


def free_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def norm(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True)
class Answer:
    question_id: int
    at: float


class BenchAPI(BotAPIServer):
    """The local Bot API server, with each chat's answers (messages with rating buttons) indexed as they come."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: dict[int, list[Answer]] = defaultdict(list)
        self.messages: Counter[int] = Counter()  # every message sent to each chat
        self.events: dict[int, asyncio.Event] = defaultdict(asyncio.Event)
        self.last_answer = time.monotonic()
        self.answer_count = 0

    async def __aenter__(self) -> BenchAPI:
        await super().__aenter__()
        return self

    async def _api_sendMessage(self, params: dict[str, Any]) -> Any:
        message = await super()._api_sendMessage(params)
        chat = params["chat_id"]
        self.messages[chat] += 1
        for row in (params.get("reply_markup") or {}).get("inline_keyboard", []):
            for button in row:
                if m := RATE_PATTERN.match(button.get("callback_data", "")):
                    self.answers[chat].append(Answer(int(m.group(1)), time.monotonic()))
                    self.last_answer = time.monotonic()
                    self.answer_count += 1
                    break
            else:
                continue
            break
        self.events[chat].set()
        return message

    def _record(self, method: str, params: dict[str, Any]) -> None:
        pass  # 200 users' thousands of requests: the bench indexes what it needs above


@dataclass
class Replica:
    name: str
    port: int
    metrics_port: int
    data_dir: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    killed: bool = False


def replica_env(
    replica: Replica, api: BotAPIServer, nginx_port: int, database_url: str, secret: str, cache: bool
) -> dict[str, str]:
    """The process environment: this machine's, minus every setting, plus the replica's."""
    fields = {name.upper() for name in Settings.model_fields}
    env = {k: v for k, v in os.environ.items() if k.upper() not in fields}
    env.update(
        PYTHONPATH=str(ROOT),
        TELEGRAM_BOT_TOKEN=api.token,
        TELEGRAM_API_URL=api.base_url,
        TELEGRAM_FILE_URL=api.base_file_url,
        TELEGRAM_MODE="webhook",
        TELEGRAM_WEBHOOK_URL=f"http://127.0.0.1:{nginx_port}/telegram",
        TELEGRAM_WEBHOOK_LISTEN="127.0.0.1",
        TELEGRAM_WEBHOOK_PORT=str(replica.port),
        TELEGRAM_WEBHOOK_SECRET=secret,
        DATABASE_URL=database_url,
        METRICS_PORT=str(replica.metrics_port),
        METRICS_LISTEN="127.0.0.1",
        BACKGROUND_INDEX_BUILD="false",
        ANSWER_CACHE="true" if cache else "false",
    )
    return env


def nginx_config(folder: Path, port: int, replicas: list[Replica]) -> Path:
    """deploy/nginx.conf with its upstream servers replaced by the replicas and its listen by 127.0.0.1:port."""
    site = (ROOT / "deploy" / "nginx.conf").read_text(encoding="utf-8")
    lines = site.splitlines()
    first = next(i for i, line in enumerate(lines) if re.match(r"\s*server \w+:\d+", line))
    params = re.sub(r"^\s*server \S+", "", lines[first])
    kept = [line for line in lines if not re.match(r"\s*server \w+:\d+", line)]
    servers = [f"    server 127.0.0.1:{r.port}{params}" for r in replicas]
    kept[first:first] = servers
    site = "\n".join(kept).replace("listen 8443;", f"listen 127.0.0.1:{port};")
    (folder / "site.conf").write_text(site, encoding="utf-8")
    user = "user root;\n" if os.geteuid() == 0 else ""  # workers must reach the temp folders below
    (folder / "nginx.conf").write_text(
        f"{user}daemon off;\nworker_processes 1;\npid {folder}/nginx.pid;\nerror_log {folder}/error.log;\n"
        "events { worker_connections 2048; }\n"
        f"http {{ access_log off; client_body_temp_path {folder}/body; proxy_temp_path {folder}/proxy;\n"
        f"  fastcgi_temp_path {folder}/fcgi; uwsgi_temp_path {folder}/uwsgi; scgi_temp_path {folder}/scgi;\n"
        f"  include {folder}/site.conf; }}\n",
        encoding="utf-8",
    )
    return folder / "nginx.conf"


async def metric(http: aiohttp.ClientSession, replica: Replica, name: str) -> float:
    """The sum of a counter's samples on a replica's /metrics (0 if it is dead)."""
    if replica.killed:
        return 0.0
    async with http.get(f"http://127.0.0.1:{replica.metrics_port}/metrics") as r:
        body = await r.text()
    return sum(s.value for family in text_string_to_metric_families(body) for s in family.samples if s.name == name)


async def wait_ready(http: aiohttp.ClientSession, replicas: list[Replica], api: BotAPIServer, limit: float) -> float:
    """Until every replica's /healthz says 200 (its chain loaded) and the webhook is set; returns the seconds."""
    started = time.monotonic()
    pending = list(replicas)
    while pending:
        if time.monotonic() - started > limit:
            raise RuntimeError(f"replicas not ready in {limit:.0f} s: {[r.name for r in pending]}")
        for r in list(pending):
            assert r.proc is not None
            if r.proc.poll() is not None:
                raise RuntimeError(f"{r.name} exited with {r.proc.returncode}; its log: {r.log}")
            with contextlib.suppress(aiohttp.ClientError):
                async with http.get(f"http://127.0.0.1:{r.metrics_port}/healthz") as resp:
                    if resp.status == 200:
                        pending.remove(r)
        await asyncio.sleep(1.0)
    while api.webhook is None:
        await asyncio.sleep(0.2)
    return time.monotonic() - started


def memory(pid: int) -> tuple[int, int]:
    """VmRSS and VmHWM of a process, in MB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("Vm")
    )
    return int(fields["VmRSS"].split()[0]) // 1024, int(fields["VmHWM"].split()[0]) // 1024


@dataclass
class Sent:
    """One question a user sent."""

    chat: int
    text: str
    phase: str  # "dialogue" or "repeat"
    turn: int
    at: float
    answered_at: float | None = None


@dataclass
class Run:
    users: int
    kill: bool
    sent: list[Sent] = field(default_factory=list)
    wall: float = 0.0
    dialogues_end: float = 0.0  # time.monotonic() when the last dialogue ended
    from_cache: int = 0  # the dialogues' answers served by the answer cache
    ready_s: float = 0.0
    killed_at: int | None = None  # answers in when the replica was killed
    killed_memory: tuple[int, int] = (0, 0)  # its VmRSS and VmHWM just before
    repeat_hits: float = 0.0
    repeats: int = 0
    memory: list[str] = field(default_factory=list)
    per_replica: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    followups: int = 0
    with_context: int = 0
    read_context: int = 0
    errors: list[str] = field(default_factory=list)
    posts_failed: int = 0


async def ask(api: BenchAPI, run: Run, chat: int, text: str, lang: str, phase: str, turn: int, args: Any) -> None:
    """Send one question and wait for its answer (or give up: --timeout, or no answer anywhere for --stall s)."""
    before = len(api.answers[chat])
    sent = Sent(chat, text, phase, turn, time.monotonic())
    run.sent.append(sent)
    api.push(message_update(chat, text, language_code=lang))
    event = api.events[chat]
    while len(api.answers[chat]) <= before:
        now = time.monotonic()
        if now - sent.at > args.timeout or now - max(api.last_answer, sent.at) > args.stall:
            return
        event.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), 5.0)
    sent.answered_at = api.answers[chat][before].at


async def command(api: BenchAPI, chat: int, text: str, lang: str, timeout: float) -> None:
    """Send a command and wait for the bot's reply message."""
    before = api.messages[chat]
    api.push(message_update(chat, text, language_code=lang))
    deadline = time.monotonic() + timeout
    while api.messages[chat] <= before and time.monotonic() < deadline:
        api.events[chat].clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(api.events[chat].wait(), 5.0)


async def user(api: BenchAPI, run: Run, chat: int, dialogue: Dialogue, args: Any) -> None:
    for turn, text in enumerate(dialogue.turns, start=1):
        await ask(api, run, chat, text, dialogue.lang, "dialogue", turn, args)


async def repeat(api: BenchAPI, run: Run, chat: int, dialogue: Dialogue, args: Any) -> None:
    await command(api, chat, "/new", dialogue.lang, args.timeout)
    await ask(api, run, chat, dialogue.turns[0], dialogue.lang, "repeat", 1, args)


def start_replicas(
    replicas: list[Replica], api: BotAPIServer, nginx_port: int, database_url: str, secret: str, work: Path, cache: bool
) -> None:
    for r in replicas:
        with r.log.open("wb") as log:
            r.proc = subprocess.Popen(
                [sys.executable, "-m", "bot", "--data-dir", str(r.data_dir)],
                cwd=work,  # no .env of the project's is read
                env=replica_env(r, api, nginx_port, database_url, secret, cache),
                stdout=log,
                stderr=subprocess.STDOUT,
            )


def stop(proc: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def one_run(cluster: Cluster, users: int, kill: bool, args: Any, work: Path) -> Run:
    run = Run(users, kill)
    pool = dialogues()
    database = cluster.new_database()
    folder = work / f"run-{users}{'-kill' if kill else ''}"
    folder.mkdir()
    replicas = [
        Replica(f"bot{n}", free_port(), free_port(), folder / f"bot{n}-data", folder / f"bot{n}.log")
        for n in range(1, REPLICAS + 1)
    ]
    for r in replicas:  # a fresh copy each: no run starts with another's embedding cache
        shutil.copytree(args.data_dir, r.data_dir, symlinks=True, ignore=shutil.ignore_patterns("bot"))
    nginx_port = free_port()
    nginx: subprocess.Popen[bytes] | None = None
    async with BenchAPI() as api, aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        try:
            start_replicas(
                replicas, api, nginx_port, cluster.url(database), secrets.token_urlsafe(24), folder, not args.no_cache
            )
            conf = nginx_config(folder, nginx_port, replicas)
            nginx = subprocess.Popen([NGINX, "-p", str(folder), "-c", str(conf)], stderr=subprocess.DEVNULL)
            run.ready_s = await wait_ready(http, replicas, api, args.ready_timeout)
            chats = [40_000 + n for n in range(users)]
            plan = [pool[n % len(pool)] for n in range(users)]

            async def killer() -> None:
                # At a time, not on an answer's arrival: that instant falls between a replica's sending an answer
                # and its recording which messages carry it, the one window where a killed replica's answer is
                # sent again by the replica that takes its update over (docs/service.md).
                await asyncio.sleep(args.kill_after)
                target = replicas[0]
                assert target.proc is not None
                run.killed_memory = memory(target.proc.pid)
                target.proc.send_signal(signal.SIGKILL)
                target.proc.wait()
                target.killed = True
                run.killed_at = api.answer_count

            killing = asyncio.create_task(killer()) if kill else None
            started = time.monotonic()
            await asyncio.gather(*(user(api, run, c, d, args) for c, d in zip(chats, plan, strict=True)))
            run.dialogues_end = time.monotonic()
            run.wall = run.dialogues_end - started
            if killing is not None:
                if not killing.done():
                    killing.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await killing

            hits_before = sum([await metric(http, r, "kzlaw_answer_cache_hits_total") for r in replicas])
            repeaters = [(c, d) for i, (c, d) in enumerate(zip(chats, plan, strict=True)) if i % 2 == 0]
            await asyncio.gather(*(repeat(api, run, c, d, args) for c, d in repeaters))
            run.repeats = len(repeaters)
            hits_after = sum([await metric(http, r, "kzlaw_answer_cache_hits_total") for r in replicas])
            run.repeat_hits = hits_after - hits_before

            for r in replicas:
                if r.killed:
                    rss, hwm = run.killed_memory
                    run.memory.append(f"{rss} ({hwm}) killed")
                else:
                    assert r.proc is not None
                    rss, hwm = memory(r.proc.pid)
                    run.memory.append(f"{rss} ({hwm})")
            run.posts_failed = sum(1 for p in api.posts if p.status != 200)
            check(run, api, cluster.url(database), replicas)
        finally:
            for r in replicas:
                stop(r.proc)
            stop(nginx, signal.SIGQUIT)
    cluster.drop_database(database)
    if not args.keep:
        for r in replicas:
            shutil.rmtree(r.data_dir, ignore_errors=True)
    return run


def check(run: Run, api: BenchAPI, url: str, replicas: list[Replica]) -> None:
    """Lost and duplicated questions, follow-ups with their context, errors: from the answers and the store."""
    with psycopg.connect(url) as conn:
        questions = {
            qid: (chat, norm(text), error)
            for qid, chat, text, error in conn.execute("SELECT id, chat_id, question, error FROM questions")
        }
        parents: dict[int, int | None] = dict(conn.execute("SELECT question_id, parent_id FROM exchanges").fetchall())
        holders = Counter(
            holder.split(":")[1]
            for (holder,) in conn.execute(
                "SELECT holder FROM updates WHERE chat_id IS NOT NULL AND done_at IS NOT NULL"
            )
        )
    run.errors = [f"question {qid}: {error}" for qid, (_, _, error) in questions.items() if error]
    run.per_replica = [str(holders.get(str(r.proc.pid), 0)) if r.proc else "-" for r in replicas]

    expected: Counter[tuple[int, str]] = Counter((s.chat, norm(s.text)) for s in run.sent)
    got: dict[tuple[int, str], list[int]] = defaultdict(list)
    for chat, answers in api.answers.items():
        for a in answers:
            asked_in, text, _ = questions[a.question_id]
            got[(chat, text)].append(a.question_id)
            if asked_in != chat:
                run.duplicated.append(f"chat {chat}: got the answer to chat {asked_in}'s question {a.question_id}")
    for key, n in expected.items():
        have = len(got.get(key, []))
        if have < n:
            run.lost.append(f"chat {key[0]}: {n - have} of {n} unanswered: {key[1][:60]!r}")
        elif have > n:
            run.duplicated.append(f"chat {key[0]}: {have} answers to {n} sent: {key[1][:60]!r}")
    for key in got.keys() - expected.keys():
        run.duplicated.append(f"chat {key[0]}: an answer to a question never sent: {key[1][:60]!r}")

    used: dict[int, bool] = {}
    cached: set[int] = set()  # question ids answered from the cache: their answer line has no stage but the total
    for r in replicas:
        log = r.log.read_text(encoding="utf-8", errors="replace")
        for m in USED.finditer(log):
            if int(m.group(2)) > 0:
                used[int(m.group(1))] = bool(m.group(3))
        for m in ANSWER_LINE.finditer(log):
            line = json.loads(m.group(1))
            if set(line.get("stages_ms", {})) == {"total"}:
                cached.add(int(line["question_id"]))
    run.from_cache = sum(
        1 for answers in api.answers.values() for a in answers if a.at <= run.dialogues_end and a.question_id in cached
    )
    by_chat: dict[int, list[Sent]] = defaultdict(list)
    for s in run.sent:
        if s.phase == "dialogue":
            by_chat[s.chat].append(s)
    for chat, turns in by_chat.items():
        ids = {}
        for s in turns:
            found = sorted(got.get((chat, norm(s.text)), []))
            if found:
                ids[s.turn] = found[0]
        for turn in (2, 3):
            if turn in ids and turn - 1 in ids:
                run.followups += 1
                if parents.get(ids[turn]) == ids[turn - 1]:
                    run.with_context += 1
                    run.read_context += used.get(ids[turn], False)


def percentile(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def row(run: Run) -> list[str]:
    times = [s.answered_at - s.at for s in run.sent if s.phase == "dialogue" and s.answered_at is not None]
    asked = sum(1 for s in run.sent if s.phase == "dialogue")
    context = f"{run.with_context}/{run.followups}" + (
        f" ({100 * run.with_context / run.followups:.0f}%)" if run.followups else ""
    )
    return [
        f"{run.users}" + (" + kill" if run.kill else ""),
        f"{len(times)}/{asked}",
        str(run.from_cache),
        f"{len(times) / run.wall:.2f}" if run.wall else "-",
        f"{statistics.median(times):.1f}" if times else "-",
        f"{percentile(times, 95):.1f}" if times else "-",
        str(len(run.lost)),
        str(len(run.duplicated)),
        context,
        f"{run.read_context}",
        f"{run.repeat_hits:.0f}/{run.repeats}",
        " / ".join(run.per_replica),
        " / ".join(run.memory),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, help="corpus and index to answer from (default: DATA_DIR or ./data)")
    parser.add_argument(
        "--users", type=int, nargs="*", default=[1, 50], help="users at once, one run each (none: only --kill)"
    )
    parser.add_argument("--kill", action="store_true", help="one more run, of --kill-users, with a replica killed")
    parser.add_argument("--kill-users", type=int, default=50, help="users of the run with a replica killed")
    parser.add_argument(
        "--kill-after", type=float, default=25.0, help="seconds into the dialogues at which the replica is killed"
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds a user waits for one answer")
    parser.add_argument(
        "--stall", type=float, default=150.0, help="seconds with no answer at all after which waiting users give up"
    )
    parser.add_argument("--ready-timeout", type=float, default=900.0, help="seconds the replicas may take to start")
    parser.add_argument(
        "--no-cache", action="store_true", help="ANSWER_CACHE=false: every answer from the chain (no hits on repeats)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the replicas' data dirs and logs (printed)")
    args = parser.parse_args(argv)
    if not Path(NGINX).exists():
        print("error: nginx is not installed (apt-get install -y nginx-light)", file=sys.stderr)
        return 2
    args.data_dir = (args.data_dir or Settings().data_dir).resolve()
    if not (args.data_dir / "published.json").exists():
        print(f"error: {args.data_dir} holds no published build (python -m ingest_adilet index)", file=sys.stderr)
        return 2

    runs: list[Run] = []
    plan = [(n, False) for n in args.users] + ([(args.kill_users, True)] if args.kill else [])
    cluster = start_cluster()
    work = Path(tempfile.mkdtemp(prefix="kzlaw-replicas-"))
    try:
        for users, kill in plan:
            run = asyncio.run(one_run(cluster, users, kill, args, work))
            runs.append(run)
            print(
                f"{users} users{' + kill' if kill else ''}: replicas ready in {run.ready_s:.0f} s, "
                f"dialogues in {run.wall:.0f} s" + (f", replica killed after {run.killed_at} answers" if kill else ""),
                file=sys.stderr,
            )
    finally:
        remove_cluster(cluster)
        if args.keep:
            print(f"kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)

    cache = "answer cache off" if args.no_cache else "answer cache on"
    table = Table(
        title=f"{REPLICAS} bot replicas (webhook, nginx, PostgreSQL), the real chain on {args.data_dir}, {cache}"
    )
    for col in (
        "users",
        "answered",
        "from cache",
        "answers/s",
        "p50, s",
        "p95, s",
        "lost",
        "dup",
        "follow-ups with context",
        "of them read",
        "cache hits / repeats",
        "answers per replica",
        "RSS (peak) MB per replica",
    ):
        table.add_column(col, justify="right")
    for run in runs:
        table.add_row(*row(run))
    Console(width=200).print(table)
    failed = False
    for run in runs:
        for line in run.lost + run.duplicated + run.errors:
            failed = True
            print(f"{run.users} users{' + kill' if run.kill else ''}: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
