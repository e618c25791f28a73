"""scripts/function_size.py, the function-size rule for Python and shell: run on a folder
made here, it finds a planted long Python function, a planted long shell function and a
long file without its note, and passes what the rule allows (the check itself runs on
the checkout as part of scripts/function_size.sh, a step of scripts/test.sh)."""
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "function_size.py"


def python_function(name: str, lines: int, reason: str = "") -> str:
    """A Python function of `lines` lines, with a reason comment above it if given."""
    above = f"# function-size: {reason}\n" if reason else ""
    body = "".join(f"    x{i} = {i}\n" for i in range(lines - 2))
    return above + f"def {name}() -> int:\n" + body + "    return 0\n"


def shell_function(name: str, lines: int, reason: str = "") -> str:
    """A shell function of `lines` lines, a here-document with a lone `}` in it."""
    above = f"# function-size: {reason}\n" if reason else ""
    body = "".join(f"  echo {i}\n" for i in range(lines - 5))
    return above + f"{name}() {{\n" + body + "  cat <<EOF\n}\nEOF\n}\n"


def run(root: Path) -> Tuple[int, List[str]]:
    """The checker on `root`: its exit status and its lines."""
    r = subprocess.run([sys.executable, str(SCRIPT), "--root", str(root)], capture_output=True,
                       text=True)
    assert r.stderr == "", r.stderr
    return r.returncode, r.stdout.splitlines()


def test_a_long_python_function_and_a_long_shell_function_are_findings(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "scripts" / "tool.py").write_text(
        '"""A tool."""\n\n\n' + python_function("short", 80) + "\n\n" + python_function("long", 81))
    (tmp_path / "tests" / "run.sh").write_text(
        "#!/usr/bin/env bash\n" + shell_function("fits", 80) + shell_function("long_one", 81))
    rc, out = run(tmp_path)
    assert rc == 1
    assert out[-1] == "function_size.py: 2 findings in 2 Python and shell files", out
    # tool.py: the docstring and 2 blank lines, `short` (80 lines), 2 blank lines, `long`
    assert out[0].startswith("scripts/tool.py:86: function 'long' is 81 lines"), out
    # run.sh: the #! line, `fits` (80 lines), `long_one`
    assert out[1].startswith("tests/run.sh:82: function 'long_one' is 81 lines"), out


def test_a_reason_above_the_function_lets_it_pass(tmp_path: Path) -> None:
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "tool.py").write_text(
        "import functools\n\n\n" + python_function("long", 120, "one table, row by row")
        .replace("def long", "@functools.lru_cache()\ndef long"))
    (tmp_path / "bench" / "run.sh").write_text(shell_function("long", 120, "the steps in order"))
    rc, out = run(tmp_path)
    assert (rc, out) == (0, ["function_size.py: 0 findings in 2 Python and shell files"])


def test_a_long_file_needs_its_note_and_a_file_that_does_not_parse_is_a_finding(
        tmp_path: Path) -> None:
    (tmp_path / "python").mkdir()
    (tmp_path / "python" / "long.py").write_text("x = 1\n" * 601)
    (tmp_path / "python" / "noted.py").write_text('"""Why this file is long: a table."""\n'
                                                  + "x = 1\n" * 700)
    (tmp_path / "python" / "broken.py").write_text("def f(:\n")
    (tmp_path / "python" / "notes.txt").write_text("not code\n" * 700)
    (tmp_path / "docs").mkdir()  # not under PATHS
    (tmp_path / "docs" / "x.py").write_text(python_function("long", 200))
    rc, out = run(tmp_path)
    assert rc == 1
    assert out[-1] == "function_size.py: 2 findings in 3 Python and shell files", out
    assert any(line.startswith("python/long.py:1: 601 lines, and its top does not say why")
               for line in out), out
    assert any(line.startswith("python/broken.py:1: does not parse as Python") for line in out), out


def test_the_checkout_passes() -> None:
    rc, out = run(ROOT)
    assert rc == 0, "\n".join(out)
