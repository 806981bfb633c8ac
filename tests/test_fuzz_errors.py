"""`refimpl fuzz` classifies errors: bad arguments and unusable infrastructure exit 2 with one
line naming the option, before any property runs (in-process: nothing here runs a property)."""

from __future__ import annotations

import socket
import textwrap
from pathlib import Path

import pytest

from refimpl.cli import main
from refimpl.fuzz.options import COMPONENTS, FuzzOptions
from tests.test_fuzz import SUITE, _run, write_suite


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    return write_suite(tmp_path / "props", "test_cse_tiny.py", SUITE)


def _fuzz(capsys, *args: str) -> tuple[int, str]:
    try:
        status = main(["fuzz", *args])
    except SystemExit as exc:  # argparse's own exit 2
        status = exc.code
    return status, capsys.readouterr().err


@pytest.mark.parametrize("args", [
    ["--minutes", "nan"], ["--minutes", "inf"], ["--minutes", "-1"], ["--minutes", "0"],
    ["--timeout", "nan"], ["--timeout", "0"], ["--max-examples", "0"],
    ["--component", "nonsense"], ["--max-examples", "3", "--minutes", "1"],
    ["--resume", "--force"], ["--engine", "afl"],
])
def test_bad_arguments_exit_2(capsys, args: list[str]):
    status, err = _fuzz(capsys, *args)
    assert status == 2
    assert err.strip()


def test_duplicate_components_are_deduplicated(capsys):
    from refimpl.cli import build_parser

    args = build_parser().parse_args(["fuzz", "--component", "flops,cse,flops"])
    assert args.component == ("flops", "cse")
    with pytest.raises(ValueError, match="at most once"):
        FuzzOptions(components=("cse", "cse"))


def test_a_repeated_component_option_names_the_union():
    """``--component flops --component partition`` runs both (it ran partition alone: the
    last option silently replaced the first); the default is all of them."""
    from refimpl.cli import build_parser

    parse = build_parser().parse_args
    assert parse(["fuzz", "--component", "flops", "--component", "partition,flops"]
                 ).component == ("flops", "partition")
    assert parse(["fuzz"]).component == COMPONENTS
    assert parse(["fuzz", "--component", "cse"]).component == ("cse",)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bad_target_module(tmp_path: Path, monkeypatch, body: str) -> str:
    name = f"bad_target_{abs(hash(body)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


@pytest.mark.parametrize(("case", "option"), [
    ("database", "--database"), ("out-file", "--out"), ("out-under-file", "--out"),
    ("out-proc", "--out"), ("out-not-empty", "--out"), ("out-foreign", "--out"),
    ("import-raises", "--target"), ("constructor-raises", "--target"),
    ("unknown-target", "--target"), ("junit-dir", "--junitxml"),
    ("properties-missing", "--properties"),
])
def test_unusable_infrastructure_exits_2_naming_the_option(
        case: str, option: str, suite: Path, tmp_path: Path, capsys, monkeypatch):
    out = tmp_path / "out"
    args = ["--component", "cse", "--properties", str(suite), "--max-examples", "2"]
    if case == "database":
        args += ["--database", f"redis://127.0.0.1:{_free_port()}/0"]
    elif case == "out-file":
        out.write_text("a file")
    elif case == "out-under-file":
        (tmp_path / "f").write_text("a file")
        out = tmp_path / "f" / "sub"
    elif case == "out-proc":
        out = Path("/proc/refimpl-cannot-write-here")
    elif case in ("out-not-empty", "out-foreign"):
        out.mkdir()
        (out / ("report.json" if case == "out-not-empty" else "notes.txt")).write_text("{}")
        if case == "out-foreign":
            args += ["--force"]
    elif case == "import-raises":
        name = _bad_target_module(tmp_path, monkeypatch, 'raise RuntimeError("no GPU")')
        args += ["--target", f"{name}:Backend"]
    elif case == "constructor-raises":
        name = _bad_target_module(tmp_path, monkeypatch, '''
            class Backend:
                name = "x"
                def __init__(self):
                    raise OSError("license server down")
        ''')
        args += ["--target", f"{name}:Backend"]
    elif case == "unknown-target":
        args += ["--target", "no_colon_here"]
    elif case == "junit-dir":
        args += ["--junitxml", str(tmp_path)]
    elif case == "properties-missing":
        args[args.index("--properties") + 1] = str(tmp_path / "nowhere")
    status, err = _fuzz(capsys, *args, "--out", str(out))
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"refimpl fuzz: {option}:"), err
    if case not in ("out-file", "out-under-file", "out-proc", "out-not-empty", "out-foreign"):
        assert not out.exists(), "nothing may be written before the arguments are checked"


def test_an_unreachable_database_is_exit_2_as_a_command(suite: Path, tmp_path: Path):
    done = _run("fuzz", "--component", "cse", "--properties", str(suite), "--out",
                str(tmp_path / "o"), "--database", f"redis://127.0.0.1:{_free_port()}/0",
                cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("refimpl fuzz: --database: cannot reach redis://")
    assert not (tmp_path / "o" / "report.json").exists()
    assert "properties" not in done.stdout  # nothing ran


def test_a_target_in_the_current_folder_is_found_by_the_console_script(suite: Path,
                                                                        tmp_path: Path):
    import shutil
    import subprocess
    import sys

    (tmp_path / "mybackend.py").write_text(textwrap.dedent('''
        class Backend:
            name = "mine"
            def fx_graph_cse(self, graph):
                return graph
    '''))
    script = Path(sys.executable).parent / "refimpl"
    script = str(script) if script.exists() else shutil.which("refimpl")
    done = subprocess.run([script, "fuzz", "--target", "mybackend:Backend", "--component",
                           "cse", "--properties", str(suite), "--max-examples", "3",
                           "--out", str(tmp_path / "o")], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr  # loaded; test_small fails
    assert "target mine" in done.stdout


def test_every_registry_name_loads_or_names_its_extra(tmp_path: Path):
    """`--target NAME` for every built-in name: the backend, or exit 2 naming the extra."""
    from refimpl.fuzz.cli import UsageError, preflight
    from refimpl.oracle import builtin_target_names
    from refimpl.oracle.registry import BUILTIN_TARGETS

    for name in builtin_target_names():
        opts = FuzzOptions(target=name, out=tmp_path / name)
        try:
            backend = preflight(opts)
        except UsageError as exc:
            extra = BUILTIN_TARGETS[name].extra
            assert extra and f"refimpl[{extra}]" in str(exc), f"{name}: {exc}"
            assert str(exc).startswith("--target: MissingExtra"), str(exc)
        else:
            assert isinstance(backend.name, str)


def test_a_missing_optional_package_exits_2_naming_the_extra(capsys, monkeypatch,
                                                             tmp_path: Path):
    from refimpl.oracle import registry

    monkeypatch.setitem(registry.BUILTIN_TARGETS, "not-installed",
                        registry.TargetEntry("no_such_package_xyz:Backend", "nopkg"))
    status, err = _fuzz(capsys, "--target", "not-installed", "--out", str(tmp_path / "o"))
    assert status == 2
    assert err.startswith("refimpl fuzz: --target: MissingExtra") and "refimpl[nopkg]" in err
