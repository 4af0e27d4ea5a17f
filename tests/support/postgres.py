"""A throwaway PostgreSQL cluster on 127.0.0.1 (Debian's postgresql binaries: initdb, pg_ctl), for one test module.

The cluster runs as the `postgres` user when the tests run as root (initdb refuses root), in a temporary folder
it owns, with trust authentication on 127.0.0.1 only; it is stopped and removed afterwards.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or (
        [shutil.which(name)] if shutil.which(name) else []
    )
    if not found:
        pytest.fail(f"{name} is missing: install Debian's postgresql package (apt-get install postgresql)")
    return str(found[-1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """postgresql://kzlaw@127.0.0.1:PORT/postgres of a fresh cluster."""
    folder = Path(tempfile.mkdtemp(prefix="kzlaw-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = folder / "data", _free_port()
    run = lambda *argv: subprocess.run([*as_user, *argv], check=True, capture_output=True, timeout=120)  # noqa: E731
    run(_bin("initdb"), "-D", str(data), "-A", "trust", "-U", "kzlaw", "--no-sync")
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
    run(_bin("pg_ctl"), "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w", "start")
    try:
        yield f"postgresql://kzlaw@127.0.0.1:{port}/postgres"
    finally:
        run(_bin("pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(folder, ignore_errors=True)
