"""What a reproducer says: its verdict lines fit 100 columns with every word kept (a long
assertion message folds, never cuts), and its docstring tells the truth about where it runs
(from any folder: it looks for a ``module:attribute`` target in the campaign's folder first,
which it names)."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

from refimpl.fuzz.options import FuzzOptions
from refimpl.fuzz.replay import WIDTH, fold, replay
from refimpl.fuzz.report import write_reproducers
from refimpl.fuzz.worker import PropertyResult

LONG = ("mine fx_graph_cse is unsound: ['outputs differ', \"values of surviving nodes differ: "
        "['cos_default', 'cos_default_1', 'cos_default_2', 'cos_default_3']\"] while the "
        "campaign recorded the same")

SUITE = f'''
from hypothesis import given, strategies as st


@given(x=st.integers(0, 3))
def test_a_property_whose_failure_explains_itself_at_length(refimpl_backend, x):
    assert refimpl_backend.name != "mine", {LONG!r}
'''

MINE = '''
class Mine:
    name = "mine"

    def fx_graph_cse(self, graph):
        return graph
'''

NODEID = "props/test_cse_long.py::test_a_property_whose_failure_explains_itself_at_length"
CALL = ("test_a_property_whose_failure_explains_itself_at_length(\n"
        "    refimpl_backend=<mine.Mine object at 0x7f0000000000>,\n    x=0,\n)")


def _campaign_folder(tmp_path: Path) -> Path:
    """A campaign's folder: the target module ``mine.py`` and the suite ``props/``."""
    home = tmp_path / "home"
    (home / "props").mkdir(parents=True)
    (home / "props" / "test_cse_long.py").write_text(textwrap.dedent(SUITE))
    (home / "mine.py").write_text(textwrap.dedent(MINE))
    return home


def test_fold_keeps_every_word_within_the_width():
    line = f"expected vs observed (this run): AssertionError: {LONG}"
    code = "  spec = GraphSpec(nodes=(" + "NodeSpec(op='cos'), " * 9 + "))"
    text = f"{line}\n  reproduce with:\n{code}"
    folded = fold(text)
    assert all(len(part) <= WIDTH for part in folded.splitlines()), folded
    assert folded.split() == text.split()  # every word, in order
    assert folded.startswith("expected vs observed (this run): AssertionError: mine")
    assert folded.splitlines()[1].startswith("  ")  # a continuation hangs


def test_the_verdict_of_a_long_failure_fits_100_columns(tmp_path: Path, monkeypatch, capsys):
    home = _campaign_folder(tmp_path)
    monkeypatch.chdir(home)
    status = replay(properties=str(home / "props"), nodeid=NODEID, target="mine:Mine",
                    call=CALL, recorded=f"AssertionError: {LONG}", cwd=str(home))
    printed = capsys.readouterr().out
    verdict = printed[printed.index("REPRODUCED: "):].splitlines()
    assert status == 1, printed
    assert max(map(len, verdict)) <= WIDTH, "\n".join(v for v in verdict if len(v) > WIDTH)
    assert verdict[0].startswith(f"REPRODUCED: {NODEID}")
    words = " ".join(verdict).split()
    this_run = f"expected vs observed (this run): AssertionError: {LONG}".split()
    campaign = f"expected vs observed (the campaign): AssertionError: {LONG}".split()
    start = words.index("expected")
    assert words[:start] == f"REPRODUCED: {NODEID} fails against mine:Mine".split()
    assert words[start:start + len(this_run)] == this_run  # then pytest's assert detail
    assert words[-len(campaign):] == campaign


def test_the_docstring_says_where_the_reproducer_runs_and_it_does(tmp_path: Path):
    """The campaign ran in ``home`` (mine.py there); its reproducer, run from another folder,
    finds the target there, as its docstring says."""
    home = _campaign_folder(tmp_path)
    out = home / "out"
    opts = FuzzOptions(target="mine:Mine", components=("cse",), out=out, seed=1,
                       max_examples=3, properties=home / "props")
    result = PropertyResult("cse", NODEID, "failed", 1, message=f"AssertionError: {LONG}",
                            example=CALL)
    written = write_reproducers([result], opts, home / "props", home)
    script = Path(written[NODEID])
    doc = ast.get_docstring(ast.parse(script.read_text()))
    assert "from any folder" in doc and "run from the folder that holds it" not in doc, doc
    assert f"'mine' importable: looked for first in {home}," in doc, doc
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run([sys.executable, str(script)], cwd=elsewhere, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"REPRODUCED: {NODEID}" in done.stdout
