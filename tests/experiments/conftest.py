"""The experiments package's tests (tests/experiments): the package is imported from the
repository's root, the dataecho package from PYTHONPATH (the build's build/python)."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
