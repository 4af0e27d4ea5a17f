"""A throwaway PostgreSQL cluster on 127.0.0.1 for the test session (Debian's `postgresql` package: initdb and
pg_ctl from /usr/lib/postgresql/*/bin), a fresh database in it for each test, and `db_settings`, the bot's store on
either engine (tests that use it run against SQLite and PostgreSQL).

PostgreSQL refuses to run as root: under root the cluster is made and started as the `postgres` user (runuser), in
a folder under /tmp that user can reach. `.ci/run` installs the package when it is missing; here a missing
PostgreSQL fails the tests, it never skips them.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from pydantic import SecretStr

from config import Settings


def pg_bin() -> Path:
    """The newest installed PostgreSQL's programs."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: int(p.parts[-3]))
    if found:
        return found[-1].parent
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).resolve().parent
    pytest.fail("PostgreSQL is not installed: apt-get install -y postgresql (.ci/run does it)")


def free_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    """A running cluster: `url(name)` is a database's DATABASE_URL."""

    folder: Path
    port: int
    run_as: list[str]
    bin: Path
    _names: Iterator[int] = itertools.count(1)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def admin(self) -> psycopg.Connection:
        return psycopg.connect(self.url(), autocommit=True)

    def new_database(self) -> str:
        name = f"t{next(self._names)}"
        with self.admin() as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return name

    def drop_database(self, name: str) -> None:
        with self.admin() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def pg_ctl(self, *args: str) -> None:
        done = subprocess.run(
            [*self.run_as, str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), *args],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            log = self.folder / "log"
            said = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"pg_ctl {args[-1]} failed ({done.returncode}): {done.stderr.strip()}\n{said}")

    def start(self) -> None:
        options = f"-h 127.0.0.1 -p {self.port} -k {self.folder} -F -c max_connections=400"
        self.pg_ctl("-o", options, "-l", str(self.folder / "log"), "-w", "start")

    def stop(self) -> None:
        self.pg_ctl("-m", "immediate", "-w", "stop")


def start_cluster() -> Cluster:
    """initdb into a new folder under /tmp and start it on 127.0.0.1 at a free port, trusting local connections."""
    binaries = pg_bin()
    # Directly under /tmp, not under TMPDIR: the server's Unix socket lives in this folder and a socket's path may
    # not exceed 107 bytes (a clone under a long path has a long TMPDIR); nor under root's pytest folder, which the
    # postgres user cannot enter.
    folder = Path(tempfile.mkdtemp(prefix="kzlaw-pg-", dir="/tmp"))
    run_as: list[str] = []
    if os.geteuid() == 0:
        user = "postgres" if _user_exists("postgres") else "nobody"
        run_as = ["runuser", "-u", user, "--"]
        os.chown(folder, pwd.getpwnam(user).pw_uid, -1)
    subprocess.run(
        [*run_as, str(binaries / "initdb"), "-D", str(folder / "data"), "-A", "trust", "-U", "postgres"]
        + ["--no-sync", "-E", "UTF8", "--no-locale"],
        check=True,
        capture_output=True,
    )
    cluster = Cluster(folder, free_port(), run_as, binaries)
    cluster.start()
    return cluster


def remove_cluster(cluster: Cluster) -> None:
    with contextlib.suppress(RuntimeError):
        cluster.stop()
    shutil.rmtree(cluster.folder, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Cluster]:
    """A PostgreSQL cluster for the whole session."""
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        remove_cluster(cluster)


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


@pytest.fixture
def pg_url(postgres: Cluster) -> Iterator[str]:
    """DATABASE_URL of a fresh database of its own for one test."""
    name = postgres.new_database()
    yield postgres.url(name)
    postgres.drop_database(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_settings(request: pytest.FixtureRequest, settings: Settings) -> Settings:
    """`settings` with the bot's store on SQLite (DATABASE_URL unset) or on a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return settings
    url = request.getfixturevalue("pg_url")
    return settings.model_copy(update={"database_url": SecretStr(url)})
