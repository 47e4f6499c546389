"""Fixtures of the package's suite: the demo model, the command-line tool to compare with, a scratch directory.

Run by tests/test_python.sh on the installed package (TD_BIN names the tool, TD_ROOT the source tree, TD_PREFIX
the installed library); by hand: PYTHONPATH=DIR-WITH-THE-PACKAGE TD_BIN=build/typedecide python3 -m pytest
python/tests from the tree's root."""

import json
import os
import subprocess

import pytest

import typedecide as td

ROOT = os.environ.get("TD_ROOT") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("TD_BIN") or os.path.join(ROOT, "build", "typedecide")
DEMO = os.path.join(ROOT, "models", "demo-qwen3")
DEMO35 = os.path.join(ROOT, "models", "demo-qwen35")
TICKET = os.path.join(ROOT, "models", "demo", "ticket.txt")
CRITERIA = os.path.join(ROOT, "models", "demo", "criteria.jsonl")
HELDOUT = os.path.join(ROOT, "fixtures", "eval", "heldout.jsonl")


def pytest_report_header(config):
    return "typedecide %s from %s, library %s" % (td.__version__, os.path.dirname(td.__file__), td.library_path())


def cli(*args, check=True, **kw):
    """Runs the tool; returns the CompletedProcess (text)."""
    r = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise AssertionError("typedecide %s failed (%d): %s" % (" ".join(map(str, args)), r.returncode, r.stderr))
    return r


def strip_ms(line):
    """A decide line without its wall time (the one member that differs between runs)."""
    o = json.loads(line)
    o.pop("ms", None)
    return o


@pytest.fixture(scope="session")
def demo():
    return td.Model(DEMO, threads=2)


@pytest.fixture(scope="session")
def ticket():
    with open(TICKET, encoding="utf-8") as f:
        return f.read()


@pytest.fixture(scope="session", autouse=True)
def installed_package():
    """When the suite tests an installed package, it must not be the source tree's."""
    if os.environ.get("TD_PREFIX"):
        here = os.path.realpath(os.path.dirname(td.__file__))
        assert not here.startswith(os.path.realpath(os.path.join(ROOT, "python"))), here
        assert td.library_path().startswith(os.environ["TD_PREFIX"]), td.library_path()
