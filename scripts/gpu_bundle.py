"""The folder a GPU machine without network installs refimpl's checks from.

    python scripts/gpu_bundle.py [--out .gpu-bundle] [--seeds SEEDS]

Run here (network, CPU). It writes OUT (default ``.gpu-bundle/`` in the repository root,
ignored by git), which the device tool carries (``carry: [".gpu-bundle"]``) and
``scripts/gpu_check.py --bundle OUT`` installs from with ``pip install --no-index
--find-links OUT/wheels -r OUT/requirements.txt``:

- ``wheels/``: refimpl's own wheel, built from this checkout, and the wheels of what the checks
  need beyond the device image's Python stack -- Hypothesis, pytest, pytest-xdist, expecttest,
  pytest-benchmark (the suite's settings pass ``--benchmark-disable``), setuptools (the
  checkout's editable install) -- with everything they require, at the versions installed
  here, downloaded with ``pip download``. Every wheel is pure Python (the device runs Python
  3.12 on x86-64; a platform wheel made here could not install there), else the script stops;
- ``requirements.txt``: refimpl at its version, and each root at its floor in refimpl's
  metadata: pip keeps the device's own copy where it is new enough and takes the bundle's
  where it is missing or too old;
- ``seeds/``: the seed files (SEEDS, by default ``shared/seeds`` in the folder that holds the
  repository: the workplace's five upstream test modules), which the device cannot see
  otherwise;
- ``bundle.json``: when, from which commit (and whether the tree had changes), what it holds.

The closure of the roots' requirements is read from the installed distributions' metadata,
with markers evaluated for CPython 3.12 on Linux x86-64 (extras left out), stopping at the
numeric stack the device image has (:data:`DEVICE_HAS`), which is neither carried nor walked.
A bundle folder is replaced whole (a ``resume/`` folder in it too: move it aside first);
a folder that is not a bundle is refused (exit 2).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

ROOT = Path(__file__).resolve().parent.parent
#: what the checks install beyond refimpl's own runtime requirements, and their floors.
ROOTS = {"hypothesis": ">=6.100", "pytest": ">=8", "pytest-xdist": ">=3", "expecttest": "",
         "pytest-benchmark": ">=4", "setuptools": ">=64"}
#: the device image's stack refimpl runs on: neither carried nor walked (too large, and the
#: device's torch is the one under test).
DEVICE_HAS = frozenset({"torch", "numpy", "scipy", "matplotlib", "tabulate", "tqdm"})
#: the environment the device's pip evaluates markers in.
DEVICE_MARKERS = {"python_version": "3.12", "python_full_version": "3.12.3",
                  "sys_platform": "linux", "platform_system": "Linux",
                  "platform_machine": "x86_64", "os_name": "posix",
                  "implementation_name": "cpython", "platform_python_implementation": "CPython",
                  "extra": ""}
#: the wheel platforms the device's pip takes besides "any" (glibc 2.28 or older, x86-64).
DEVICE_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
                    "manylinux2014_x86_64", "manylinux1_x86_64")
#: what refimpl's wheel is built from (a copy, so the checkout's own metadata is untouched);
#: properties/ is the property suite, which setup.cfg installs as refimpl.properties.
WHEEL_SOURCES = ("setup.cfg", "pyproject.toml", "README.md", "LICENSE", "refimpl", "properties")


class BundleError(Exception):
    """The bundle cannot be made: one line, exit 2."""


def requires(name: str) -> list[str]:
    """The distributions ``name`` requires on the device (markers evaluated, no extras)."""
    needed = []
    for text in metadata.requires(name) or []:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate(DEVICE_MARKERS):
            needed.append(canonicalize_name(requirement.name))
    return needed


def closure(roots: list[str]) -> dict[str, str]:
    """{distribution: installed version} for ``roots`` and all they require, walked
    breadth-first, :data:`DEVICE_HAS` left out. Invariant: every requirement met on the
    device is either in the result or in DEVICE_HAS."""
    found: dict[str, str] = {}
    todo = [canonicalize_name(root) for root in roots]
    while todo:
        name = todo.pop(0)
        if name in found or name in DEVICE_HAS:
            continue
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            raise BundleError(f"{name} is required but not installed here: pip install "
                              f"it, then run again") from None
        todo += requires(name)
    return found


def download(versions: dict[str, str], wheels: Path) -> None:
    pins = [f"{name}=={version}" for name, version in sorted(versions.items())]
    platforms = [word for name in DEVICE_PLATFORMS for word in ("--platform", name)]
    command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary",
               ":all:", "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312",
               "--abi", "abi3", "--abi", "none", *platforms, "-d", str(wheels), *pins]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise BundleError(f"pip download failed (network?): {last}")


def build_refimpl(wheels: Path) -> None:
    """refimpl's wheel, built from a copy of this checkout's package sources."""
    with tempfile.TemporaryDirectory(prefix="refimpl-wheel-") as copy:
        for name in WHEEL_SOURCES:
            source = ROOT / name
            if source.is_dir():
                shutil.copytree(source, Path(copy) / name,
                                ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(source, Path(copy) / name)
        command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                   "--no-build-isolation", "-w", str(wheels), copy]
        done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise BundleError(f"building refimpl's wheel failed: {done.stderr.strip()[-300:]}")


def installs_on_device(wheel: str) -> bool:
    """Whether one of the wheel's tags is one the device's CPython 3.12 takes."""
    for tag in parse_wheel_filename(wheel)[3]:
        python = tag.interpreter in ("py3", "py312", "cp312") or (
            tag.abi == "abi3" and tag.interpreter.startswith("cp3")
            and int(tag.interpreter[3:]) <= 12)
        abi = tag.abi in ("none", "abi3", "cp312")
        if python and abi and tag.platform in ("any", *DEVICE_PLATFORMS):
            return True
    return False


def check_installable(wheels: Path) -> list[str]:
    names = sorted(path.name for path in wheels.glob("*.whl"))
    refused = [name for name in names if not installs_on_device(name)]
    if refused:
        raise BundleError(f"wheels the device's CPython 3.12 (manylinux x86-64) cannot "
                          f"install: {', '.join(refused)}")
    return names


def requirements_text() -> str:
    lines = [f"refimpl=={metadata.version('refimpl')}"]
    lines += [f"{name}{floor}" for name, floor in ROOTS.items()]
    return "\n".join(lines) + "\n"


def copy_seeds(seeds: Path, into: Path) -> list[str]:
    files = sorted(seeds.glob("[0-9][0-9][0-9]_*.txt"))
    if not files:
        raise BundleError(f"--seeds {seeds}: holds no seed files (NNN_*.txt)")
    into.mkdir()
    for path in [*files, *seeds.glob("README.md")]:
        shutil.copy2(path, into / path.name)
    return [path.name for path in files]


def git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def fresh(out: Path) -> None:
    """OUT emptied: a bundle is replaced; any other non-empty folder is refused."""
    if out.exists() and any(out.iterdir()) and not (out / "bundle.json").is_file():
        raise BundleError(f"--out {out}: a non-empty folder that is not a bundle")
    shutil.rmtree(out, ignore_errors=True)
    (out / "wheels").mkdir(parents=True)
    (out / "bundle.json").write_text("{}\n")  # a bundle in the making: replaced next time


def make(out: Path, seeds: Path) -> dict:
    """The bundle at ``out``; returns what bundle.json records."""
    if not seeds.is_dir():
        raise BundleError(f"--seeds {seeds}: not a folder")
    fresh(out)
    versions = closure(list(ROOTS))
    download(versions, out / "wheels")
    build_refimpl(out / "wheels")
    (out / "requirements.txt").write_text(requirements_text())
    record = {"made": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "commit": git("rev-parse", "HEAD"),
              "tree_changed": bool(git("status", "--porcelain", "--", "refimpl", "properties")),
              "wheels": check_installable(out / "wheels"),
              "seeds": copy_seeds(seeds, out / "seeds")}
    (out / "bundle.json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / ".gpu-bundle")
    parser.add_argument("--seeds", type=Path, default=ROOT.parent / "shared" / "seeds")
    args = parser.parse_args(argv)
    try:
        record = make(args.out.resolve(), args.seeds)
    except BundleError as error:
        print(f"gpu_bundle.py: {error}", file=sys.stderr)
        return 2
    size = sum(path.stat().st_size for path in args.out.rglob("*") if path.is_file())
    print(f"{args.out}: {len(record['wheels'])} wheels, {len(record['seeds'])} seed files, "
          f"{size / 2**20:.1f} MiB (carry it: the device tool's limit is 64 MiB in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
