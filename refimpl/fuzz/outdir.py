"""The campaign's --out folder: checked before anything runs, and clean at the start of a run.

A run never mixes its files with an earlier run's: a non-empty --out is refused unless

- ``--resume``: the earlier campaign's example database (``hypothesis-db/``) is kept, so its
  failures are replayed first, and everything else it wrote is removed; a ``hypothesis-db``
  that is not a folder we can write is refused (the workers would run without it, silently);
- ``--force``: everything the earlier campaign wrote is removed, its database too.

Either way only the entries a campaign writes (:data:`CAMPAIGN_ENTRIES`) are removed, and only
from a folder that holds the campaign marker (:data:`MARKER`, written when a campaign starts):
a folder without it, or holding anything else, is refused, so a mistyped --out never deletes a
user's files, not even ones named like a campaign's (``examples/``, ``logs/``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

#: what a campaign writes into --out (nothing else is ever deleted).
CAMPAIGN_ENTRIES = ("report.json", "summary.txt", "junit.xml", "reproducers", "examples",
                    "logs", "events", "hypothesis-db", "hypothesis-home", "hypofuzz",
                    "baseline")
DATABASE = "hypothesis-db"
#: Hypothesis's storage folder for the workers (its constants cache), kept out of the cwd.
HYPOTHESIS_HOME = "hypothesis-home"
#: the file that proves a folder is a campaign's output (written first, by :func:`clean_out`).
MARKER = ".refimpl-fuzz"


class OutError(ValueError):
    """--out cannot be used as it is."""


def check_writable_folder(folder: Path) -> None:
    """Raise OSError unless ``folder`` is (or can be made) a folder we can write into.
    Leaves the file system as it found it (folders it had to create are removed again)."""
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"{folder} exists and is not a folder")
    existing = folder.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise NotADirectoryError(f"{folder} lies under {existing}, which is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise PermissionError(f"{existing} is not writable")
    created = [p for p in [folder.absolute(), *folder.absolute().parents]
               if not p.exists()]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".refimpl-write-probe"
        probe.write_text("")
        probe.unlink()
    finally:
        for path in created:  # innermost first
            if path.is_dir():
                path.rmdir()


def check_out(out: Path, *, resume: bool, force: bool) -> None:
    """Raise :class:`OutError` unless ``out`` can hold this run (nothing is removed here)."""
    try:
        if out.is_dir() and any(out.iterdir()):
            if not (resume or force):
                raise OutError(
                    f"{out} is not empty (an earlier campaign's output?): pass --resume to "
                    "continue it (keeps its example database) or --force to replace it, "
                    "or choose another --out")
            if not (out / MARKER).is_file():
                raise OutError(f"{out} is not a refimpl fuzz output folder (it has no {MARKER} "
                               "marker), so nothing in it will be removed; choose another --out")
            foreign = sorted(p.name for p in out.iterdir()
                             if p.name not in (*CAMPAIGN_ENTRIES, MARKER))
            if foreign:
                raise OutError(f"{out} holds files a campaign did not write "
                               f"({', '.join(foreign[:5])}); choose another --out")
            if resume:
                check_resumable_database(out / DATABASE)
        check_writable_folder(out)
    except OSError as exc:
        raise OutError(str(exc)) from exc


def check_resumable_database(database: Path) -> None:
    """Raise :class:`OutError` unless the example database ``--resume`` keeps is absent (a
    campaign that stored nothing) or a folder that can be written: Hypothesis would neither
    read nor write a file there, and the campaign would run without it, saying nothing."""
    if not (database.exists() or database.is_symlink()):
        return
    if not database.is_dir():
        raise OutError(f"{database} is not a folder, so --resume cannot keep it as the "
                       "example database; remove it, or pass --force instead of --resume")
    try:
        check_writable_folder(database)
    except OSError as exc:
        raise OutError(f"--resume keeps the example database {database}, but {exc}") from exc


def check_junitxml(junitxml: Path, out: Path) -> None:
    """Raise :class:`OutError` if ``junitxml`` would overwrite what the campaign writes into
    ``out`` (report.json, a reproducer, ...): only ``out/junit.xml`` is allowed inside it."""
    target, folder = junitxml.absolute(), out.absolute()
    if folder in target.parents and target != folder / "junit.xml":
        raise OutError(f"{junitxml} lies inside --out {out}, where the campaign writes its own "
                       f"files; write it elsewhere, or as {out / 'junit.xml'}")


def clean_out(out: Path, *, resume: bool) -> None:
    """Remove an earlier campaign's files from ``out`` (its database too unless ``resume``)
    and mark ``out`` as a campaign's."""
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("written by refimpl fuzz: this folder is its output\n")
    for name in CAMPAIGN_ENTRIES:
        if resume and name == DATABASE:
            continue
        path = out / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    for sub in ("reproducers", "logs", "events", "examples"):
        (out / sub).mkdir(parents=True, exist_ok=True)
