"""Moving a staged build into the data dir, and recovering from a writer killed while it did.

A writer that replaces whole folders (refresh, unpack) builds them in a stage folder inside the data dir
(`.refresh-*`, `.unpack-*`), then calls `swap_in`: it first writes the stage's `swap.json` — the generation that
was published when the swap began (`base`) and the one it is about to publish (`target`) — then moves the new
folders in (the current ones aside into the stage) and publishes `target`. A kill can land anywhere in that.

`recover`, run by every writer as soon as it holds the write lock (`index.publish.writing`), resolves each stage
against the publication, which is the truth:
- `published.json` names `target`: the build was moved in and published; the folders set aside are dropped.
- it still names `base`: the swap never published; the folders set aside go back (what was moved in is dropped),
  so the data dir holds exactly the published build again.
- it names anything else: another build was published since; the stage is stale and is dropped, never restored
  over the newer build.
A stage with folders set aside but no `swap.json` (left by an older version) cannot be resolved: the writer refuses
and says what to look at. Readers call `interrupted` to say "interrupted refresh: run …" instead of failing on a
half-moved folder.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from config import Settings
from corpus.errors import UserError
from corpus.files import atomic_write, swap_folders
from index.publication import LOCK_FILE, publish, published, read_publication

logger = logging.getLogger(__name__)

INTENT_FILE = "swap.json"
# stage prefix → the command that finishes or redoes that writer's work
STAGES = {".refresh-": "python -m ingest_adilet refresh", ".unpack-": "python -m ingest_adilet unpack PACK"}


class InterruptedStage(UserError):
    """A writer was killed while moving a build in and its stage cannot be resolved automatically."""


class SwapIntent(BaseModel):
    """What a writer is about to move in (written to its stage before the first rename)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    by: str
    base: str | None  # the generation published when the swap began
    target: str  # the generation the swap publishes
    new: str  # folder in the stage holding the new folders ("." for the stage itself)
    aside: str  # folder in the stage the replaced folders go to
    names: tuple[str, ...]
    had: tuple[str, ...]  # of `names`, the folders the data dir had before the swap


def swap_in(settings: Settings, stage: Path, new: Path, aside: Path, names: Sequence[str], by: str) -> str:
    """Move `new/NAME` into the data dir (the current ones to `aside`) and publish; recoverable by `recover` at
    every point. Returns the published generation. An OSError from a move leaves the previous build in place."""
    data_dir = Path(settings.data_dir)
    current = published(settings)
    intent = SwapIntent(
        by=by,
        base=current.generation if current else None,
        target=uuid.uuid4().hex,
        new=os.path.relpath(new, stage),
        aside=os.path.relpath(aside, stage),
        names=tuple(names),
        had=tuple(n for n in names if (data_dir / n).exists()),
    )
    atomic_write(stage / INTENT_FILE, intent.model_dump_json() + "\n")
    try:
        swap_folders(data_dir, new, aside, names)
    except BaseException:
        (stage / INTENT_FILE).unlink(missing_ok=True)  # swap_folders put the previous folders back
        raise
    return publish(settings, by, generation=intent.target).generation


def _stages(data_dir: Path) -> list[tuple[Path, str]]:
    return sorted((p, command) for prefix, command in STAGES.items() for p in data_dir.glob(prefix + "*") if p.is_dir())


def _intent(stage: Path) -> SwapIntent | None:
    try:
        return SwapIntent.model_validate_json((stage / INTENT_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, ValidationError) as err:
        raise InterruptedStage(f"{stage / INTENT_FILE} is unreadable ({err}); {_LOOK}") from None


_LOOK = "move its folders back by hand, or remove it and install a build with `python -m ingest_adilet unpack PACK`"


def _set_aside(stage: Path) -> list[Path]:
    """Folders a legacy stage (no swap.json) moved out of the data dir."""
    return [stage / sub / n for sub in ("previous", "old") for n in ("corpus", "index") if (stage / sub / n).exists()]


def recover(data_dir: Path) -> None:
    """Resolve every stage a killed writer left, against the publication (see the module docstring); the caller
    holds the write lock. InterruptedStage when one cannot be resolved."""
    data_dir = Path(data_dir)
    for stage, _command in _stages(data_dir):
        intent = _intent(stage)
        if intent is None:
            if aside := _set_aside(stage):
                raise InterruptedStage(
                    f"interrupted write: {stage} holds {', '.join(str(p.relative_to(stage)) for p in aside)} "
                    f"moved out of {data_dir} and no record of what was published; {_LOOK}."
                )
            logger.info("removing %s, left by a writer killed before it moved anything", stage)
            shutil.rmtree(stage, ignore_errors=True)
            continue
        current = read_publication(data_dir)
        generation = current.generation if current else None
        if generation == intent.target:
            logger.info("%s: its build %s was published; dropping the folders it replaced", stage, intent.target)
        elif generation == intent.base:
            logger.warning("%s was killed while moving its build in: putting the published build back", stage)
            _undo(data_dir, stage, intent)
        else:
            logger.warning("%s: build %s was published since; dropping this stale stage", stage, generation)
        shutil.rmtree(stage, ignore_errors=True)


def _undo(data_dir: Path, stage: Path, intent: SwapIntent) -> None:
    """Put the folders set aside back, dropping what was moved in; each step a rename, so a kill here is resumed."""
    new, aside = stage / intent.new, stage / intent.aside
    dropped = stage / "unpublished"
    dropped.mkdir(exist_ok=True)
    for name in intent.names:
        shutil.rmtree(dropped / name, ignore_errors=True)  # a previous recovery killed half-way
        moved_in = not (new / name).exists() and (data_dir / name).exists()
        if name in intent.had:
            if (aside / name).exists():  # moved out: whatever is in its place now was moved in
                if (data_dir / name).exists():
                    os.replace(data_dir / name, dropped / name)
                os.replace(aside / name, data_dir / name)
        elif moved_in:
            os.replace(data_dir / name, dropped / name)


def interrupted(data_dir: Path) -> str | None:
    """For readers: a message when a writer was killed while moving a build in and nothing has recovered it yet
    (None when there is no such stage, or a writer is at work on the data dir now)."""
    data_dir = Path(data_dir)
    stages = [(s, c) for s, c in _stages(data_dir) if (s / INTENT_FILE).exists() or _set_aside(s)]
    if not stages:
        return None
    try:
        fd = os.open(data_dir / LOCK_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)  # never through a link
    except OSError:
        pass
    else:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return None  # a writer holds the lock: it is moving its build in (or recovering) now
        finally:
            os.close(fd)  # closing releases a shared lock taken here
    stage, command = stages[0]
    what = stage.name.split("-")[0].lstrip(".")
    return f"interrupted {what} in {data_dir} ({stage.name}): run `{command} --data-dir {data_dir}` to recover it"
