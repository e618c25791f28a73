#!/usr/bin/env python3
"""Checks that README.md and the pages of docs/ lead somewhere.

  scripts/check_doc_links.py [FILE.md ...]

For README.md, docs/*.md, docs/history/*.md and results/README.md (or the files
named): every relative markdown link [text](path) must name a file or folder that
exists, relative to the page; and every repository path the text cites
(src/..., include/..., docs/..., bench/..., results/... and the other top-level
folders, and a top-level NAME.md such as README.md) must exist, relative to the
repository root. A cited path with a glob, a brace range or a placeholder (*, {, <,
@) is not checked, nor a program named after its source file (bench/echo_bench for
bench/echo_bench.cc). Prints each missing target with its file and line; exits 1 if
any. Needs only Python 3; not run by CI.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOP = ("src", "include", "docs", "bench", "scripts", "experiments", "examples", "tests",
       "python", "results", "fuzz", "proto", "cmake")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CITED = re.compile(r"(?<![\w./-])((?:%s)/[\w./+-]*[\w/])" % "|".join(TOP))
SKIP = re.compile(r"[*{}<>@$]")
ROOT_DOC = re.compile(r"(?<![\w./-])([A-Z][A-Z_]+\.md)\b")  # README.md, DESIGN.md


def pages():
    out = ["README.md", "results/README.md"]
    for folder in ("docs", "docs/history"):
        out += sorted(os.path.join(folder, f) for f in os.listdir(os.path.join(ROOT, folder))
                      if f.endswith(".md"))
    return out


def check(page):
    missing = []
    path = os.path.join(ROOT, page)
    here = os.path.dirname(path)
    in_fence = False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.lstrip().startswith("```"):
                in_fence = not in_fence
            for url in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:|^#", url):
                    continue
                target = url.split("#", 1)[0]
                if target and not os.path.exists(os.path.join(here, target)):
                    missing.append((n, "link", url))
            for name in ROOT_DOC.findall(line):
                if not os.path.exists(os.path.join(ROOT, name)) and not os.path.exists(
                        os.path.join(here, name)):
                    missing.append((n, "path", name))
            for cited in CITED.findall(line):
                end = line[line.find(cited) + len(cited):]
                if SKIP.search(cited) or end[:1] in "*{<@$" or end[:2] == ".{":
                    continue
                # "examples/s" is a unit; a built program is named after its source file.
                if len(os.path.basename(cited.rstrip("/"))) < 2 or any(
                        os.path.exists(os.path.join(ROOT, cited + ext)) for ext in (".cc", ".py")):
                    continue
                # A command line in a fenced block may name outputs that a run creates.
                if in_fence and not os.path.exists(os.path.join(ROOT, cited.rstrip("/"))):
                    if cited.startswith("results/") or cited.startswith("docs/"):
                        missing.append((n, "path", cited))
                    continue
                if not os.path.exists(os.path.join(ROOT, cited.rstrip("/"))):
                    missing.append((n, "path", cited))
    return missing


def main():
    files = sys.argv[1:] or pages()
    bad = 0
    for page in files:
        for n, kind, what in check(page):
            print(f"{page}:{n}: {kind} to a missing file: {what}")
            bad += 1
    print(f"check_doc_links: {len(files)} pages, {bad} missing")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
