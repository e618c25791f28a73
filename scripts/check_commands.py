#!/usr/bin/python3
"""Every program the project's scripts call is installed by scripts/bootstrap.sh.

A new machine has only what scripts/bootstrap.sh installs; a development machine or CI may
have more, installed by hand, and a green CI then hides a missing package. This check
lists the programs called by the shell scripts (parsed with shfmt, so that only command
positions count; a wrapper's program counts as called: timeout, sudo, xargs, env,
`ip netns exec` and `command`, `command -v` too, since a script that looks a program up
expects it), by the Python files (a subprocess call whose list starts with a literal
name, and shutil.which of one) under
scripts/, tests/, experiments/, bench/, examples/ and .ci/, and by the C++ code
(CXX_COMMANDS below), and checks that each one resolves on this machine to a file that
dpkg says comes from a package in bootstrap.sh's list (`--list-packages`, the
--bench-deps ones included), from a package those depend on, or from Debian's required
set (a minimal root has it). Seconds, no root.

  scripts/check_commands.py [--verbose]

Prints one line per program with --verbose; ends "check_commands: N programs, all
installed by scripts/bootstrap.sh" or lists what is missing and exits 1.
"""
import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIRS = ["scripts", "tests", "experiments", "bench", "examples", ".ci"]

# Programs the C++ code and its tests run, with a file that runs each (checked to still
# mention it, so that the list cannot outlive its reason).
CXX_COMMANDS = {
    "nginx": "src/io/nginx_config.cc",
    "gnuplot": "src/train/experiment_plots.cc",
    "spm_train": "tests/formats/tokenize_test.cc",
    "tar": "tests/formats/tar_test.cc",
    "openssl": "tests/io/https_test.cc",
    "sh": "tests/distributed/distributed_test.cc",
    "node": "tests/s3/s3_server.cc",
}
# Files run by hand only, for a maintainer's task, that install or name what they need.
BY_HAND = {
    "scripts/make_jpeg_corpus.py":
        "regenerates the committed JPEG fuzz corpus with cjpeg, ffmpeg and guetzli (its usage says so)",
    "scripts/tsan_stress.sh":
        "a by-hand stress run beside stress-ng; it says `apt-get install stress-ng` when it is missing",
    "scripts/fresh_check.sh":
        "installs debootstrap itself; the commands it runs inside the root are the README's",
}
# Wrappers whose next word (after their options) is the program they run.
WRAPPERS = {"sudo", "exec", "command", "timeout", "env", "nice", "setsid", "stdbuf", "xargs",
            "taskset", "nohup", "unbuffer", "time", "flock"}
# Options of those wrappers that take a value.
WRAPPER_VALUE_OPTIONS = {"-s", "--signal", "-k", "--kill-after", "-n", "-u", "-I", "-P", "-L",
                         "-c", "-d", "--delimiter", "-E", "-o", "-e", "-i"}
BUILTINS = set("""
. : [ [[ alias bg bind break builtin caller cd command compgen complete compopt continue
declare dirs disown echo enable eval exec exit export false fc fg getopts hash help history
jobs kill let local logout mapfile popd printf pushd pwd read readarray readonly return set
shift shopt source suspend test times trap true type typeset ulimit umask unalias unset wait
""".split())


def tracked_files():
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "--", *DIRS], capture_output=True,
                         text=True)
    if out.returncode == 0 and out.stdout.strip():
        return out.stdout.split()
    files = []  # not a git checkout (a copy made by git archive)
    for d in DIRS:
        for dirpath, _, names in os.walk(os.path.join(ROOT, d)):
            files += [os.path.relpath(os.path.join(dirpath, n), ROOT) for n in names]
    return files


def is_shell(path):
    if path.endswith(".sh"):
        return True
    try:
        with open(os.path.join(ROOT, path), "rb") as f:
            first = f.readline()
    except OSError:
        return False
    return first.startswith(b"#!") and re.search(rb"\b(ba)?sh\b", first) is not None


def lit(word):
    """A word's literal text, or None when any part of it is not a plain literal."""
    parts = word.get("Parts", [])
    text = ""
    for p in parts:
        if p.get("Type") == "Lit":
            text += p["Value"]
        elif p.get("Type") == "SglQuoted":
            text += p["Value"]
        elif p.get("Type") == "DblQuoted" and all(q.get("Type") == "Lit" for q in p.get("Parts", [])):
            text += "".join(q["Value"] for q in p.get("Parts", []))
        else:
            return None
    return text


def program_of(args):
    """The program a call runs (its words as literals or None): a name, or None."""
    i = 0
    while i < len(args):
        w = args[i]
        if w is None:  # "$BIN" ...: a program named by a variable (the project's own)
            return None
        if w in ("ip",) and args[i + 1:i + 3] == ["netns", "exec"]:
            i += 4
            continue
        if w in WRAPPERS and i + 1 < len(args):
            j = i + 1
            while j < len(args) and args[j] is not None and (args[j].startswith("-") or "=" in args[j]):
                if args[j] in ("-v", "-V") and w == "command":
                    break
                j += 1 + (args[j] in WRAPPER_VALUE_OPTIONS)
            if w == "command" and j < len(args) and args[j] in ("-v", "-V"):
                j += 1
            if w == "timeout" and j < len(args) and args[j] is not None and re.fullmatch(r"[0-9.]+[smhd]?", args[j]):
                j += 1
            if w == "chroot":
                return None
            i = j
            continue
        return w
    return None


def walk(node, funcs, calls):
    if isinstance(node, dict):
        t = node.get("Type")
        if t == "FuncDecl":
            funcs.add(node["Name"]["Value"])
        if t == "CallExpr" and node.get("Args"):
            words = [lit(a) for a in node["Args"]]
            prog = program_of(words)
            if prog is not None:
                calls.append((prog, node["Pos"]["Line"]))
        for v in node.values():
            walk(v, funcs, calls)
    elif isinstance(node, list):
        for v in node:
            walk(v, funcs, calls)


def shell_calls(path, funcs):
    r = subprocess.run(["shfmt", "--tojson"], stdin=open(os.path.join(ROOT, path)),
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"check_commands: shfmt cannot parse {path}: {r.stderr.strip()}")
    calls = []
    walk(json.loads(r.stdout), funcs, calls)
    return calls


PY_CALL = re.compile(r"(?:subprocess\.\w+\(\s*|\bcmd\s*=\s*|\brun\(\s*)\[\s*[\"']([A-Za-z][\w.+-]*)[\"']")
PY_WHICH = re.compile(r"shutil\.which\(\s*[\"']([A-Za-z][\w.+-]*)[\"']")


def python_calls(path):
    calls = []
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            for m in PY_CALL.finditer(line):
                calls.append((m.group(1), n))
            for m in PY_WHICH.finditer(line):
                calls.append((m.group(1), n))
    return calls


def bootstrap_packages():
    r = subprocess.run([os.path.join(ROOT, "scripts/bootstrap.sh"), "--list-packages"],
                       capture_output=True, text=True, check=True)
    return set(r.stdout.split())


def installed():
    """{package: (priority, [dependencies])} of every installed package."""
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\t${Priority}\t${Status}\t${Pre-Depends}, ${Depends}\n"],
                       capture_output=True, text=True, check=True)
    pkgs = {}
    for line in r.stdout.splitlines():
        name, prio, status, deps = line.split("\t")
        if not status.endswith("installed") or status.startswith("deinstall"):
            continue
        names = []
        for alt in deps.split(","):
            for d in alt.split("|"):
                d = d.strip().split(" ")[0].split(":")[0]
                if d:
                    names.append(d)
        pkgs[name] = (prio, names)
    return pkgs


def provided(pkgs):
    """Virtual package name -> installed packages that provide it."""
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\t${Provides}\n"], capture_output=True,
                       text=True, check=True)
    out = {}
    for line in r.stdout.splitlines():
        name, prov = line.split("\t")
        if name not in pkgs:
            continue
        for p in prov.split(","):
            p = p.strip().split(" ")[0]
            if p:
                out.setdefault(p, []).append(name)
    return out


def closure(roots, pkgs, virtual):
    seen, todo = set(), list(roots)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        for q in [p] + virtual.get(p, []):
            if q in pkgs:
                if q not in seen:
                    todo.append(q)
                todo += pkgs[q][1]
    return seen


def owner(path):
    # Debian 12 merges /bin into /usr/bin, but dpkg records many files under /bin
    candidates = [path, re.sub(r"^/usr/(s?bin)/", r"/\1/", path), os.path.realpath(path)]
    for p in candidates:
        r = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            if r.returncode == 0 and not line.startswith("diversion by "):
                return line.split(":")[0].split(",")[0].strip()
    return None


def main(argv):
    verbose = "--verbose" in argv
    files = tracked_files()
    funcs, calls = set(), {}  # program -> [file:line]
    shell = [f for f in files if is_shell(f) and f not in BY_HAND]
    per_file = {f: shell_calls(f, funcs) for f in shell}
    for f in files:
        if f.endswith(".py") and f not in BY_HAND:
            per_file[f] = python_calls(f)
    for f, cs in per_file.items():
        for prog, line in cs:
            calls.setdefault(prog, []).append(f"{f}:{line}")
    problems = []
    for prog, src in CXX_COMMANDS.items():
        with open(os.path.join(ROOT, src), encoding="utf-8") as fh:
            if prog not in fh.read():
                problems.append(f"{prog}: CXX_COMMANDS says {src} runs it, but it does not name it (update the list)")
        calls.setdefault(prog, []).append(src)
    ours = {os.path.basename(f) for f in files} | {"dataecho", "dataecho-train"}
    programs = {}
    for prog, where in calls.items():
        base = os.path.basename(prog)
        if prog in BUILTINS or prog in funcs or base in ours:
            continue
        if "/" in prog and not prog.startswith(("/usr/", "/bin/", "/sbin/")):
            continue  # a path of the project's (scripts/..., build/...) or a variable's
        programs[base if prog.startswith("/") else prog] = where
    packages = bootstrap_packages()
    pkgs = installed()
    virtual = provided(pkgs)
    required = {p for p, (prio, _) in pkgs.items() if prio == "required"}
    allowed = closure(packages, pkgs, virtual) | closure(required, pkgs, virtual)
    # The folders Debian's packages install programs in: a program found only elsewhere
    # (/usr/local, a user's environment) is one a new machine lacks.
    path = "/usr/sbin:/usr/bin:/sbin:/bin"
    for prog in sorted(programs):
        where = programs[prog]
        found = shutil.which(prog, path=path)
        if found is None:
            problems.append(f"{prog}: not installed here (called in {', '.join(where[:3])}); "
                            "scripts/bootstrap.sh installs no package that provides it")
            continue
        pkg = owner(found)
        if pkg is None:
            problems.append(f"{prog}: {found} comes from no Debian package (called in {', '.join(where[:3])}); "
                            "a new machine will not have it")
        elif pkg not in allowed:
            problems.append(f"{prog}: {found} comes from package {pkg}, which scripts/bootstrap.sh does not "
                            f"install (called in {', '.join(where[:3])}): add {pkg} to its PACKAGES")
        elif verbose:
            print(f"  {prog:<22} {pkg:<28} {where[0]}")
    if problems:
        print("check_commands: programs the scripts call that a new machine would lack:")
        for p in problems:
            print("  " + p)
        return 1
    print(f"check_commands: {len(programs)} programs, all installed by scripts/bootstrap.sh")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
