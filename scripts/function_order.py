#!/usr/bin/python3
"""Writes src/python/function_order.txt: the order in which the Python extension's
functions are laid out (gold's --section-ordering-file, CMakeLists.txt).

Why: the kernel maps a shared library's file pages 64 KiB at a time around each page
fault (fault-around), and a process's RSS and PSS count every page mapped. Laid out in
the compiler's order, the extension's 2 MB of code is touched all over by `import
dataecho` and a short pipeline: 968 KiB mapped after the import, 1,928 after a text
pipeline. Laid out in the order below, the code those use sits together: 544 and 928
KiB (docs/python.md, "Memory of the extension").

How: the extension is built once more with -finstrument-functions (in BUILD, default
build-instr: the engine and the extension only), and each workload below runs in its
own process with a small hook (scripts/function_order_hook.c, LD_PRELOAD) that records
every function the first time it is entered. The order is then:

  1. what `import dataecho` runs, in first-call order;
  2. what two or more of the workloads run beyond that (the pipeline machinery);
  3. what one workload alone runs, workload by workload.

Usage (from the repository root; a few minutes, most of it the build):
  scripts/function_order.py [--build build-instr] [--out src/python/function_order.txt]

A function missing from the list (new since the list was written) is laid out after
the listed ones; a listed name that no longer exists is ignored. So a stale list costs
memory, never correctness: rerun this after large changes to the engine or the binding.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Each workload is a Python program run with the built package on its path and a
# scratch folder as argv[1]; they use the public API only.
WORKLOADS = {
    "import": "import dataecho\n",
    "text": r'''
import os, sys, json, gzip
import dataecho as de
d = sys.argv[1]
lines = ["word " * (1 + (i * 37) % 300) for i in range(3000)]
with open(os.path.join(d, "a.txt"), "w") as f:
    f.write("\n".join(lines) + "\n")
with gzip.open(os.path.join(d, "b.txt.gz"), "wt") as f:
    f.write("\n".join(lines[:500]) + "\n")
with open(os.path.join(d, "c.jsonl"), "w") as f:
    for i, l in enumerate(lines[:500]):
        f.write(json.dumps({"text": l, "id": i}) + "\n")
files = [os.path.join(d, "a.txt"), os.path.join(d, "b.txt.gz")]
t = de.text(files).map("tokenize", tokenizer="bytes", parallelism=1)
for p in (t.bucket([128, 256, 512], [64, 32, 16, 8]),
          t.bucket([128, 256, 512], [64, 32, 16, 8]).prefetch(4),
          de.text(files).map("tokenize", tokenizer="bytes", parallelism=2).bucket([128, 512], [32, 16, 8]),
          t.pack(129).shuffle(64).padded_batch(16),
          t.padded_batch(16),
          t.padded_batch(16).unbatch().echo(2).padded_batch(8),
          de.text([os.path.join(d, "c.jsonl")], format="jsonl").map("tokenize", tokenizer="bytes").padded_batch(8)):
    for _ in range(2):
        with p.build(seed=1) as it:
            for b in it:
                pass
''',
    "images": r'''
import os, sys
import numpy as np
from PIL import Image
import dataecho as de
d = sys.argv[1]
rng = np.random.default_rng(0)
for c in ("cat", "dog"):
    os.makedirs(os.path.join(d, "tree", c))
    for i in range(12):
        a = rng.integers(0, 255, (48 + i, 64, 3), dtype=np.uint8)
        Image.fromarray(a).save(os.path.join(d, "tree", c, f"{i}.jpg" if i % 3 else f"{i}.png"))
f = de.files(os.path.join(d, "tree"))
for p in (f.map("decode_augment", random_resized_crop=32, flip=True, normalize=True, parallelism=2)
           .echo(2).shuffle(16).batch(8).prefetch(2),
          f.map("decode_augment", random_resized_crop=32, parallelism=1).batch(4)):
    for _ in range(2):
        with p.build(seed=3) as it:
            for b in it:
                pass
''',
    "generic": r'''
import dataecho as de
def double(x):
    x["y"] = x["value"] * 2
    return x
p = de.range(2000).map(double).shuffle(100).echo(2).batch(32).prefetch(2)
for _ in range(2):
    with p.build(seed=5) as it:
        for b in it:
            pass
for b in de.TorchIterable(de.range(500).batch(50)):
    pass
''',
}


def text_symbols(so):
    """Offset -> the mangled names of the code symbols there (a constructor's C1 and C2
    share one body, and gcc names its section after one of them)."""
    out = subprocess.run(["nm", "--defined-only", so], check=True, capture_output=True, text=True).stdout
    syms = {}
    for line in out.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in "tTwWiu":
            syms.setdefault(int(p[0], 16), []).append(p[2])
    return syms


PREFIXES = (".text.unlikely.", ".text.startup.", ".text.hot.", ".text.exit.", ".text.")


def base_name(fn):
    """A function's name without gcc's clone suffixes (NAME.isra.0, NAME.constprop.0,
    NAME.part.0, NAME.cold, and target_clones' NAME.avx2, NAME.default, NAME.resolver):
    a C++ mangled name has no dot. Static initializers (_GLOBAL__sub_I_file.cc) keep
    theirs."""
    if fn.startswith("_GLOBAL__"):
        return fn
    # a constructor's or destructor's variants (C1/C2, D0/D1/D2) are one function here:
    # gcc emits one body under either name
    return CTOR_DTOR.sub(r"\1", fn.split(".", 1)[0])


CTOR_DTOR = re.compile(r"(C|D)[0-2](?=[EI])")


def function_sections(build):
    """Function name -> the names of its code sections in the objects of a build made
    with -ffunction-sections (.text.NAME, or .text.unlikely.NAME, .text.startup.NAME...,
    for each clone gcc made too: NAME.isra.0, NAME.constprop.0, NAME.part.0)."""
    objects = glob.glob(os.path.join(build, "CMakeFiles", "dataecho*.dir", "**", "*.o"), recursive=True)
    by_function = {}
    for obj in objects:
        out = subprocess.run(["readelf", "-SW", obj], check=True, capture_output=True, text=True).stdout
        names = set(re.findall(r"\] (\.text\.\S+)", out))
        for name in names:
            fn = next(name[len(p):] for p in PREFIXES if name.startswith(p))
            # gcc splits a function's rarely run part into .text.unlikely.NAME beside
            # .text.NAME: that part belongs with the rarely run code
            if name.startswith(".text.unlikely.") and ".text." + fn in names:
                continue
            by_function.setdefault(base_name(fn), set()).add(name)
    return by_function


def run_workload(name, build, hook, scratch):
    record = os.path.join(scratch, f"{name}.order")
    work = os.path.join(scratch, name)
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"), LD_PRELOAD=hook, FN_ORDER_OUT=record)
    subprocess.run([sys.executable, "-c", WORKLOADS[name], work], check=True, env=env)
    return record


def first_calls(record, so, syms):
    """The names, in first-call order, of the extension's functions in a record."""
    names = []
    real = os.path.realpath(so)
    with open(record) as f:
        for line in f:
            obj, off = line.rsplit(" ", 1)
            if os.path.realpath(obj) != real:
                continue
            names += syms.get(int(off, 16), [])
    return names


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build-instr"))
    ap.add_argument("--out", default=os.path.join(ROOT, "src", "python", "function_order.txt"))
    ap.add_argument("--layout-build", default=os.path.join(ROOT, "build"),
                    help="the build to lay out, made with function sections: its section names are listed")
    a = ap.parse_args()
    flags = "-ffunction-sections -finstrument-functions"
    subprocess.run(["cmake", "-S", ROOT, "-B", a.build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                    "-DDATAECHO_BUILD_BENCH=OFF", "-DDATAECHO_BUILD_TESTS=OFF", "-DDATAECHO_BUILD_TRAINER=OFF",
                    "-DDATAECHO_BUILD_CLI=OFF", "-DDATAECHO_ORDER_FUNCTIONS=OFF", f"-DCMAKE_CXX_FLAGS={flags}"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["ninja", "-C", a.build, "dataecho_python"], check=True)
    so = glob.glob(os.path.join(a.build, "python", "dataecho", "_core*.so"))[0]
    syms = text_symbols(so)
    with tempfile.TemporaryDirectory() as scratch:
        hook = os.path.join(scratch, "libfunction_order_hook.so")
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", hook,
                        os.path.join(ROOT, "scripts", "function_order_hook.c"), "-ldl", "-lpthread"], check=True)
        calls = {n: [base_name(f) for f in first_calls(run_workload(n, a.build, hook, scratch), so, syms)]
                 for n in WORKLOADS}
    imported = list(dict.fromkeys(calls["import"]))
    rest = [n for n in WORKLOADS if n != "import"]
    uses = {}
    for n in rest:
        for f in dict.fromkeys(calls[n]):
            uses.setdefault(f, []).append(n)
    for f in imported:
        uses.pop(f, None)
    parts = [("import", imported), ("shared", [f for f, by in uses.items() if len(by) >= 2])]
    parts += [(n, [f for f, by in uses.items() if by == [n]]) for n in rest]
    sections = function_sections(a.layout_build)
    if not sections:
        sys.exit(f"function_order: no objects with function sections under {a.layout_build} "
                 "(configure it with DATAECHO_ORDER_FUNCTIONS=ON and build it first)")
    # target_clones' resolvers run first of all, while the loader relocates the extension
    listed = dict.fromkeys(sorted(sec for secs in sections.values() for sec in secs if sec.endswith(".resolver")))
    starts = []
    for part, fns in parts:
        starts.append(f"{part} at {len(listed)}")
        listed.update(dict.fromkeys(sec for f in fns for sec in sorted(sections.get(f, ()))))
    with open(a.out, "w") as out:
        out.write("".join(sec + "\n" for sec in listed))
    print(f"function_order: {len(listed)} sections -> {a.out}; the parts begin: " + ", ".join(starts))


if __name__ == "__main__":
    main()
