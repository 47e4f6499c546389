"""The ctypes mirrors of the headers' structs have the headers' sizes and offsets: a C program compiled against the
installed headers prints them. A field added to the header and not to python/typedecide/_lib.py fails here."""

import ctypes
import os
import subprocess

import pytest

from typedecide import _lib


def header_dir():
    prefix = os.environ.get("TD_PREFIX")
    if prefix:
        return os.path.join(prefix, "include")
    from conftest import ROOT
    return os.path.join(ROOT, "include")


def test_struct_layouts(tmp_path):
    cc = os.environ.get("CC", "cc")
    # the core header and the applications' (typedecide_eval.h holds td_eval_params), all installed side by side
    headers = sorted(f for f in os.listdir(header_dir()) if f.startswith("typedecide") and f.endswith(".h"))
    assert "typedecide.h" in headers
    lines = ["#include <stddef.h>", "#include <stdio.h>"] + ["#include <%s>" % h for h in headers] + ["int main(void) {"]
    expected = []
    for py, c in _lib.STRUCTS.items():
        cls = getattr(_lib, py)
        lines.append('    printf("%s %%zu %%zu\\n", sizeof(%s), _Alignof(%s));' % (c, c, c))
        expected.append("%s %d %d" % (c, ctypes.sizeof(cls), ctypes.alignment(cls)))
        for name, _ in cls._fields_:
            lines.append('    printf("%s.%s %%zu\\n", offsetof(%s, %s));' % (c, name, c, name))
            expected.append("%s.%s %d" % (c, name, getattr(cls, name).offset))
    lines += ["    return 0;", "}"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "layout"
    r = subprocess.run([cc, "-std=c11", "-I", header_dir(), str(src), "-o", str(exe)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail("a mirrored field is not in the header (python/typedecide/_lib.py):\n" + r.stderr[-3000:])
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")[:-1]
    assert got == expected
