#!/usr/bin/python3
"""Function size for the project's Python and shell code: the rule that
scripts/function_size.sh applies to the C++ code (clang-tidy's readability-function-size
at 80 lines), applied to every .py and .sh file (and every file whose first line names
bash, sh or python) under PATHS.

* A Python function (def or async def, a method or a nested function too) of more than
  80 lines, end_lineno - lineno + 1 as Python's `ast` gives them, is a finding.
* A shell function `name() {` (or `function name {`) is measured from that line to the
  `}` at its indent; here-documents are skipped. More than 80 lines is a finding.
* Either is not a finding when the comment lines right above it (above its decorators)
  carry `function-size: REASON`, REASON saying why splitting would hurt, as a C++
  function carries NOLINTNEXTLINE(readability-function-size) under its reason.
* A file of more than 600 lines is a finding unless its first 15 lines say why ("Why
  this file is long: ..."). A Python file that does not parse is a finding.

  scripts/function_size.py [--root DIR]      (default: the repository)

Prints each finding as FILE:LINE: ..., then "function_size.py: N findings in M files";
exits 1 when N > 0. Debian's python3, the standard library only.
"""
import argparse
import ast
import os
import re
import subprocess
import sys
from typing import Iterator, List, Optional, Tuple

# The folders whose Python and shell code the rule covers, relative to the root.
PATHS = ["scripts", "bench", "python", "tests", "experiments"]
MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 600
LONG_FILE_NOTE = "Why this file is long"
REASON = re.compile(r"#\s*function-size:\s*\S")
SHELL_FUNCTION = re.compile(r"^(\s*)(?:function\s+([\w:.-]+)\s*(?:\(\))?|([\w:.-]+)\s*\(\))\s*(\{)?\s*(?:#.*)?$")
HEREDOC = re.compile(r"(?<!<)<<(-?)\s*(['\"]?)([A-Za-z_]\w*)\2")


def files_under(root: str) -> List[str]:
    """The tracked files under PATHS (every file there outside a git checkout), relative
    to root."""
    listed = subprocess.run(["git", "-C", root, "ls-files", "--", *PATHS],
                            capture_output=True, text=True)
    if listed.returncode == 0 and listed.stdout.strip():
        return listed.stdout.split()
    out = []
    for top in PATHS:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            out += [os.path.relpath(os.path.join(dirpath, n), root) for n in sorted(names)]
    return sorted(out)


def kind_of(path: str) -> Optional[str]:
    """"python", "shell" or None, by extension or else by the first line."""
    if path.endswith(".py"):
        return "python"
    if path.endswith(".sh"):
        return "shell"
    try:
        with open(path, "rb") as f:
            first = f.readline(200)
    except OSError:
        return None
    if first.startswith(b"#!"):
        if b"python" in first:
            return "python"
        if re.search(rb"\b(ba)?sh\b", first):
            return "shell"
    return None


def has_reason(lines: List[str], first: int) -> bool:
    """Whether the comment lines right above line `first` (1-based) give a reason."""
    n = first - 2
    while n >= 0 and lines[n].lstrip().startswith("#"):
        if REASON.search(lines[n]):
            return True
        n -= 1
    return False


def python_functions(text: str) -> Iterator[Tuple[str, int, int]]:
    """(name, first line counting its decorators, length from the def line) of every
    function."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            top = min([node.lineno] + [d.lineno for d in node.decorator_list])
            end = node.end_lineno if node.end_lineno is not None else node.lineno
            yield node.name, top, end - node.lineno + 1


def shell_functions(lines: List[str]) -> Iterator[Tuple[str, int, int]]:
    """(name, first line, length) of every shell function: from `name() {` to the `}`
    at the same indent, here-documents skipped; an unclosed one runs to the end."""
    n = 0
    while n < len(lines):
        m = SHELL_FUNCTION.match(lines[n])
        if not m:
            n += 1
            continue
        indent, name = m.group(1), m.group(2) or m.group(3)
        start = n
        if not m.group(4):  # the brace on the next line
            if n + 1 >= len(lines) or lines[n + 1].strip() != "{":
                n += 1
                continue
            n += 1
        close = re.compile(r"^" + re.escape(indent) + r"\}")
        end, terminator = len(lines) - 1, None
        for k in range(n + 1, len(lines)):
            line = lines[k]
            if terminator is not None:
                if line.strip() == terminator:
                    terminator = None
                continue
            heredoc = HEREDOC.search(line)
            if heredoc:
                terminator = heredoc.group(3)
            elif close.match(line):
                end = k
                break
        yield name, start + 1, end - start + 1
        n = end + 1


def check_file(root: str, path: str, kind: str) -> List[str]:
    """The findings of one file."""
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        text = f.read()
    lines = text.splitlines()
    findings = []
    if len(lines) > MAX_FILE_LINES and not any(LONG_FILE_NOTE in line for line in lines[:15]):
        findings.append(f"{path}:1: {len(lines)} lines, and its top does not say why "
                        f"(\"{LONG_FILE_NOTE}: ...\")")
    if kind == "python":
        try:
            functions = list(python_functions(text))
        except SyntaxError as e:
            return findings + [f"{path}:{e.lineno}: does not parse as Python ({e.msg}), so its "
                               "functions cannot be measured"]
        measured = functions
    else:
        measured = list(shell_functions(lines))
    for name, top, length in measured:
        if length > MAX_FUNCTION_LINES and not has_reason(lines, top):
            findings.append(f"{path}:{top}: function '{name}' is {length} lines (more than "
                            f"{MAX_FUNCTION_LINES}): split it, or say why not above it "
                            "(# function-size: REASON)")
    return findings


def main() -> int:
    """Checks every Python and shell file under PATHS; prints the findings."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    root = parser.parse_args().root
    findings, checked = [], 0
    for path in files_under(root):
        kind = kind_of(os.path.join(root, path))
        if kind is None:
            continue
        checked += 1
        findings += check_file(root, path, kind)
    for line in findings:
        print(line)
    print(f"function_size.py: {len(findings)} findings in {checked} Python and shell files")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
