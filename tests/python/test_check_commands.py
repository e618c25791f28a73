"""scripts/check_commands.py: which word of a shell command is the program it runs (the
check itself runs on the checkout as a step of scripts/test.sh)."""
import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("check_commands", ROOT / "scripts/check_commands.py")
cc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cc)

needs_shfmt = pytest.mark.skipif(shutil.which("shfmt") is None, reason="shfmt (scripts/bootstrap.sh installs it)")


def programs(script: str) -> list:
    r = subprocess.run(["shfmt", "--tojson"], input=script, capture_output=True, text=True, check=True)
    funcs, calls = set(), []
    cc.walk(json.loads(r.stdout), funcs, calls)
    return [p for p, _ in calls]


@needs_shfmt
def test_command_positions_only():
    assert programs('echo "then gnuplot"; x=$(sed -n 1p f | wc -l)\n') == ["echo", "sed", "wc"]


@needs_shfmt
def test_wrappers_name_the_program():
    assert programs("timeout -s INT 40m nginx -t\nsudo apt-get update\nxargs -n 1 gzip\n") == \
        ["nginx", "apt-get", "gzip"]
    assert programs("ip netns exec ns1 curl -s x\ncommand -v clang-tidy >/dev/null\n") == ["curl", "clang-tidy"]
    assert programs("env -i A=1 B=2 tc qdisc\n") == ["tc"]


@needs_shfmt
def test_variables_and_functions_are_not_programs():
    funcs, calls = set(), []
    r = subprocess.run(["shfmt", "--tojson"], input='f() { :; }\n"$BIN" pipe x\n$SUDO apt-get x\nf\n',
                       capture_output=True, text=True, check=True)
    cc.walk(json.loads(r.stdout), funcs, calls)
    assert funcs == {"f"}
    assert [p for p, _ in calls] == [":", "f"]


def test_python_calls():
    line = 'r = subprocess.run(["gnuplot", "plots.gp"]); shutil.which("nginx"); subprocess.run([sys.executable])'
    assert [m.group(1) for m in cc.PY_CALL.finditer(line)] + [m.group(1) for m in cc.PY_WHICH.finditer(line)] == \
        ["gnuplot", "nginx"]

