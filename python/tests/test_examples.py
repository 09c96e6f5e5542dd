"""The example the documentation shows runs and prints what its comments say."""

import os
import subprocess
import sys

import pytest

from conftest import REPO


def test_quickstart_example():
    pytest.importorskip("pyarrow")
    path = os.path.join(REPO, "python", "examples", "quickstart.py")
    done = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "('price', 'DECIMAL', None, None, 10, 2, True)"
    assert lines[1] == "[(1, 'tea', Decimal('2.50')), (2, None, Decimal('1.25'))]"
    assert lines[2] == "[1 2]"
    with open(path) as f:
        example = f.read()
    with open(os.path.join(REPO, "README.md")) as f:
        readme = f.read()
    # The README's snippet is the example's body.
    body = example[example.index("with tunadb.connect"):example.index("    arrays =")]
    assert body in readme
