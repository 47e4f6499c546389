"""examples/demo_table.py prints the table of `make demo` (typedecide decide --table), but for the ms column."""

import os
import re
import subprocess
import sys

from conftest import CRITERIA, DEMO, ROOT, TICKET, cli


def test_demo_table_equals_cli():
    expected = cli("decide", "--table", "--quiet", "--model", DEMO, "--evidence", TICKET, "--criteria", CRITERIA).stdout
    got = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "demo_table.py")], capture_output=True,
                         text=True, check=True).stdout
    wall = re.compile(r" +[0-9]+\.[0-9]$", re.M)  # the ms column of the criterion lines
    assert wall.sub("", got) == wall.sub("", expected)
    assert len(got.splitlines()) == 9
