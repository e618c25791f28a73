"""The extension's code is laid out in the order of src/python/function_order.txt
(CMakeLists.txt, DATAECHO_ORDER_FUNCTIONS; scripts/function_order.py writes the list), so
that `import dataecho` and a short pipeline map a few hundred KiB of its code instead of
nearly all of it (docs/python.md, "Memory"). These tests read the built extension's
symbol table: they fail if the link stops honouring the list, or if the list has gone so
stale that most of what it names no longer exists. CTest sets DATAECHO_FUNCTION_ORDER
when the build orders the extension; without it (no gold, or the option off) they skip.
"""
import os
import subprocess

import pytest

import dataecho

ORDER = os.environ.get("DATAECHO_FUNCTION_ORDER")
pytestmark = pytest.mark.skipif(not ORDER, reason="this build does not order the extension's functions")
PREFIXES = (".text.unlikely.", ".text.startup.", ".text.hot.", ".text.exit.", ".text.")


def code_symbols():
    """Name -> (lowest address, size) of the extension's code symbols."""
    out = subprocess.run(["nm", "-S", "--defined-only", dataecho._core.__file__], check=True,
                         capture_output=True, text=True).stdout
    syms = {}
    for line in out.splitlines():
        p = line.split()
        if len(p) == 4 and p[2] in "tTwW":
            a = int(p[0], 16)
            if p[3] not in syms or a < syms[p[3]][0]:
                syms[p[3]] = (a, int(p[1], 16))
    return syms


def listed_functions():
    """The function named by each section of the list, in its order."""
    with open(ORDER) as f:
        sections = [line.strip() for line in f if line.strip()]
    return [next(s[len(p):] for p in PREFIXES if s.startswith(p)) for s in sections]


def test_most_of_the_list_names_functions_of_this_build():
    syms = code_symbols()
    listed = listed_functions()
    missing = [n for n in listed if n not in syms]
    assert len(missing) <= len(listed) // 2, (
        f"{len(missing)} of the {len(listed)} functions src/python/function_order.txt lists are "
        f"not in {dataecho._core.__file__} (first: {missing[:3]}): the list is stale, rerun "
        "scripts/function_order.py")


def test_the_listed_functions_are_laid_out_in_the_listed_order():
    syms = code_symbols()
    present = [n for n in listed_functions() if n in syms]
    addresses = [syms[n][0] for n in present]
    backwards = [present[i] for i in range(1, len(present)) if addresses[i] < addresses[i - 1]]
    # A local clone made in several files (name.constprop.0) has one address here per
    # file, and only the lowest is compared: a few steps back are expected.
    assert len(backwards) <= max(3, len(present) // 100), (
        f"{len(backwards)} of {len(present)} listed functions lie before the one listed ahead "
        f"of them (first: {backwards[:3]}): the link did not follow {ORDER}")


def test_the_listed_functions_sit_together():
    syms = code_symbols()
    listed = set(listed_functions())
    addresses = sorted(syms[n][0] for n in listed if n in syms)
    lo, hi = addresses[len(addresses) // 100], addresses[-1 - len(addresses) // 100]
    inside = [(n, size) for n, (a, size) in syms.items() if lo <= a <= hi]
    others = sum(size for n, size in inside if n not in listed)
    total = sum(size for _, size in inside)
    assert others <= total // 10, (
        f"{others} of the {total} bytes of code between the listed functions belong to functions "
        "the list does not name: the listed ones are not laid out together")
