"""The package without torch: the extension does not link LibTorch (batches leave as
DLPack capsules), so with torch unimportable `import dataecho` works, numpy mode gives
numpy batches, and asking for torch tensors fails with torch's ImportError."""

import subprocess
import sys
import textwrap

BLOCKER = textwrap.dedent("""
    import importlib.abc, sys

    class NoTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ImportError(f"{name} is blocked by test_no_torch")
            return None

    sys.meta_path.insert(0, NoTorch())
""")


def run_without_torch(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", BLOCKER + textwrap.dedent(code)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_blocker_blocks_torch():
    out = run_without_torch("""
        try:
            import torch
        except ImportError as e:
            print("blocked:", e)
    """)
    assert "blocked: torch is blocked" in out


def test_numpy_pipeline_without_torch():
    out = run_without_torch("""
        import sys
        import numpy as np
        import dataecho as de

        d = (de.range(12)
               .map(lambda e: {"value": e["value"] * 10}, as_numpy=True)
               .echo(2)
               .batch(4))
        rows = []
        for b in d.build(seed=3, as_numpy=True):
            assert isinstance(b["value"], np.ndarray), type(b["value"])
            rows += b["value"].reshape(-1).tolist()
        assert sorted(set(rows)) == [10 * i for i in range(12)], rows
        assert len(rows) == 24, rows
        assert not any(m == "torch" or m.startswith("torch.") for m in sys.modules)
        try:
            next(iter(de.range(2).build()))      # torch tensors asked for, torch absent
        except ImportError as e:
            assert "torch" in str(e), e
        else:
            raise AssertionError("torch batches without torch")
        print("numpy batches without torch:", len(rows), "rows, dataecho", de.__version__)
    """)
    assert "numpy batches without torch: 24 rows" in out
