"""deploy/ cannot drift from the code: every command its compose file, container file and systemd units run parses
against the real `--help` (the same check as the docs' commands, tests/test_docs.py), every setting they set is a
`Settings` field, and nginx accepts its configuration (`nginx -t`, Debian's nginx, with the replicas' names mapped
to 127.0.0.1). No container is built here: no base image can be pulled on this machine (docs/service.md)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from config import Settings
from tests.test_docs import Command, Helps, _commands_in, drift

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
COMPOSE = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
OUTSIDE = {"POSTGRES_USER", "POSTGRES_DB", "POSTGRES_PASSWORD", "OMP_WAIT_POLICY"}  # the postgres image's, OpenMP's


def _shell(service: dict) -> str:
    """The command line a compose service runs (entrypoint + command, as the image's `python -m` entrypoint)."""
    entry = service.get("entrypoint") or ["python", "-m"]
    command = service.get("command") or ["bot"]
    if entry == ["sh", "-c"]:
        return " ".join(command)
    return " ".join([*entry, *command])


def deploy_commands() -> list[Command]:
    found = []
    for name, service in COMPOSE["services"].items():
        if "image" in service and service["image"] == "kz-law":
            found += _commands_in(_shell(service).replace("$$", "$"), f"deploy/compose.yaml:{name}")
    for unit in sorted((DEPLOY / "systemd").glob("*.service")):
        for line in unit.read_text(encoding="utf-8").splitlines():
            if line.startswith("ExecStart="):
                text = line.removeprefix("ExecStart=")
                inner = re.search(r"-c '(.*)'", text)
                found += _commands_in(inner.group(1) if inner else text, f"deploy/systemd/{unit.name}")
    container = (DEPLOY / "Containerfile").read_text(encoding="utf-8")
    entry = " ".join(yaml.safe_load(re.search(r"^ENTRYPOINT (.*)$", container, re.M).group(1)))
    cmd = " ".join(yaml.safe_load(re.search(r"^CMD (.*)$", container, re.M).group(1)))
    found += _commands_in(f"{entry} {cmd}", "deploy/Containerfile")
    return found


COMMANDS = deploy_commands()


def test_every_role_is_found() -> None:
    """The bot (compose, Containerfile, systemd), the index build and the daily refresh (compose and systemd)."""
    shown = {(c.where.split(":")[0], c.target, c.args[:1]) for c in COMMANDS}
    assert ("deploy/Containerfile", "bot", ()) in shown
    assert ("deploy/systemd/kz-law-bot@.service", "bot", ()) in shown
    assert ("deploy/compose.yaml", "ingest_adilet", ("refresh",)) in shown
    assert ("deploy/compose.yaml", "ingest_adilet", ("index",)) in shown
    assert ("deploy/systemd/kz-law-refresh.service", "ingest_adilet", ("refresh",)) in shown


@pytest.mark.parametrize("command", COMMANDS, ids=str)
def test_a_deployed_command_runs_as_written(command: Command) -> None:
    assert drift(command, Helps()) == []


def test_every_setting_set_is_a_setting() -> None:
    fields = {name.upper() for name in Settings.model_fields}
    named = set()
    for service in COMPOSE["services"].values():
        named |= set(service.get("environment") or {})
    for unit in (DEPLOY / "systemd").glob("*.service"):
        text = unit.read_text(encoding="utf-8")
        named |= set(re.findall(r"\b([A-Z][A-Z_]+)=", text)) - {"ExecStart", "User"}
    assert named - OUTSIDE <= fields, f"not settings: {sorted(named - OUTSIDE - fields)}"
    assert {"DATABASE_URL", "TELEGRAM_MODE", "METRICS_PORT"} <= named


def test_two_replicas_share_one_database() -> None:
    bots = [s for s in COMPOSE["services"].values() if s.get("command") == ["bot"]]
    assert len(bots) >= 2
    assert len({s["environment"]["DATABASE_URL"] for s in bots}) == 1
    upstreams = re.findall(r"server (\w+):(\d+)", (DEPLOY / "nginx.conf").read_text(encoding="utf-8"))
    assert {name for name, _ in upstreams} == {n for n, s in COMPOSE["services"].items() if s in bots}


def test_the_programs_sharing_a_host_let_each_other_embed() -> None:
    """Two replicas and the refresh on one host: their e5 engines' waiting threads sleep at once (index/embeddings.py
    SPIN_COUNT is for a process alone)."""
    programs = [s for s in COMPOSE["services"].values() if s.get("image") == "kz-law"]
    assert len(programs) >= 4  # two bots, the refresh, the index build
    assert all((s.get("environment") or {}).get("OMP_WAIT_POLICY") == "PASSIVE" for s in programs)


def test_nginx_accepts_the_configuration(tmp_path: Path) -> None:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    assert Path(nginx).exists(), "nginx is not installed (.ci/run installs Debian's nginx)"
    site = (DEPLOY / "nginx.conf").read_text(encoding="utf-8")
    site = re.sub(r"server (\w+):", "server 127.0.0.1:", site).replace("listen 8443", "listen 127.0.0.1:18443")
    (tmp_path / "site.conf").write_text(site, encoding="utf-8")
    (tmp_path / "nginx.conf").write_text(
        f"pid {tmp_path}/nginx.pid; error_log {tmp_path}/error.log;\n"
        f"events {{}}\nhttp {{ access_log off; include {tmp_path}/site.conf; }}\n",
        encoding="utf-8",
    )
    done = subprocess.run([nginx, "-t", "-c", str(tmp_path / "nginx.conf")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("unit", sorted(p.name for p in (DEPLOY / "systemd").iterdir()))
def test_systemd_accepts_the_unit(unit: str, tmp_path: Path) -> None:
    """`systemd-analyze verify` (Debian's systemd) on each unit, the install's python being this one: an unknown key,
    a missing ExecStart or a timer without its service is an error."""
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is not installed (.ci/run installs Debian's systemd)"
    for path in (DEPLOY / "systemd").iterdir():  # a timer is checked with the service it starts
        text = path.read_text(encoding="utf-8").replace("/srv/kz-law/.venv/bin/python", sys.executable)
        (tmp_path / path.name.replace("@.", "@1.")).write_text(text, encoding="utf-8")
    env = {**os.environ, "SYSTEMD_LOG_LEVEL": "warning"}
    done = subprocess.run(
        [analyze, "verify", "--man=no", f"./{unit.replace('@.', '@1.')}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
    )
    assert (done.returncode, done.stdout + done.stderr) == (0, "")
