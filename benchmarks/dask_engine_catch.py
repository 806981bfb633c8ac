"""Seconds to catch each deliberately broken backend: the plain runner vs ``--engine dask``.

    python benchmarks/dask_engine_catch.py                 # every backend, both engines
    python benchmarks/dask_engine_catch.py --timeout 300   # seconds one campaign may run

For each backend of ``tests/broken_backends.py`` (its ``BROKEN`` map: backend -> component),
run the same campaign as ``tests/test_oracle_catches_bugs.py`` (``--profile ci --fail-fast
--no-shrink``, the default 10 examples per property, only that component) twice, from the
repository root: with the plain runner, and with ``--engine dask --jobs 2`` (a LocalCluster of
two workers on loopback). Each wall time counts the whole command (Python start, the cluster's
start, collection, the report). Prints one Markdown row per backend: the seconds, the exit
status of each (1 = caught) and the property that caught it; a campaign that did not exit 1
in time is shown as such, never as a catch.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.broken_backends import BROKEN  # noqa: E402  (the repository root, just added)

ENGINES = {"runner": [], "dask, 2 workers": ["--engine", "dask", "--jobs", "2"]}


def campaign(backend: type, component: str, engine: list[str], timeout: float) -> dict:
    """One campaign's wall seconds, exit status and the first property that failed."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        cmd = [sys.executable, "-m", "refimpl", "fuzz", "--target",
               f"tests.broken_backends:{backend.__name__}", "--component", component,
               "--profile", "ci", "--fail-fast", "--no-shrink", "--out", str(out), *engine]
        start = time.monotonic()
        try:
            done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"seconds": time.monotonic() - start, "status": "timeout", "by": ""}
        seconds = time.monotonic() - start
        rows = json.loads((out / "report.json").read_text())["properties"] if (
            out / "report.json").exists() else []
        by = next((r["nodeid"].split("::")[-1] for r in rows if r["outcome"] == "failed"), "")
        return {"seconds": seconds, "status": done.returncode, "by": by}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds one campaign may run (default 600)")
    args = parser.parse_args()
    names = list(ENGINES)
    print(f"| backend | component | {' | '.join(f'{n}: s (exit)' for n in names)} | "
          "caught by (runner / dask) |")
    print("| --- | --- |" + " --- |" * len(names) + " --- |")
    for backend, component in BROKEN.items():
        got = [campaign(backend, component, ENGINES[n], args.timeout) for n in names]
        cells = " | ".join(f"{g['seconds']:.1f} ({g['status']})" for g in got)
        print(f"| {backend.name} | {component} | {cells} | "
              f"{' / '.join(g['by'] or '-' for g in got)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
