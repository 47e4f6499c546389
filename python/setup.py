"""The typedecide Python package: a ctypes binding of the installed (or named) libtypedecide.

    python3 -m pip install ./python                           # in a venv (python3 -m venv --system-site-packages)
    python3 -m pip install --target DIR ./python              # or anywhere on PYTHONPATH

Deliberately a setup.py without a pyproject.toml: pip then builds it with the setuptools and wheel already
installed (Debian's python3-setuptools, python3-wheel) instead of fetching them into an isolated build environment,
so the build needs nothing from a registry. The package is pure Python; at run time it needs numpy and the shared
library. The version is the header's (include/typedecide.h, TD_VERSION_STRING): the one number of td_version() and
the soname. The installed package records the library it was built against: $TYPEDECIDE_LIBRARY if set, else the
one pkg-config names, else none (then the system's loader finds libtypedecide.so.MAJOR).
"""

import os
import re
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def header_version():
    with open(os.path.join(HERE, "..", "include", "typedecide.h")) as f:
        return re.search(r'^#define TD_VERSION_STRING "([0-9]+\.[0-9]+\.[0-9]+)"$', f.read(), re.M).group(1)


VERSION = header_version()


def library():
    path = os.environ.get("TYPEDECIDE_LIBRARY")
    if path:
        return os.path.abspath(path)
    try:
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "typedecide"], capture_output=True, text=True,
                                check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    path = os.path.join(libdir, "libtypedecide.so.%s" % VERSION.split(".")[0])
    return path if os.path.exists(path) else None


class BuildPy(build_py):
    """Writes the installed typedecide/_build.py: the version and the library found now."""

    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "typedecide", "_build.py")
        with open(target, "w") as f:
            f.write('"""Written by setup.py: what this package was built against."""\n'
                    "VERSION = %r\nLIBRARY = %r\n" % (VERSION, library()))


setup(
    name="typedecide",
    version=VERSION,
    description="Typed decisions with small local language models: Python binding of libtypedecide",
    packages=["typedecide"],
    python_requires=">=3.9",
    install_requires=["numpy"],
    cmdclass={"build_py": BuildPy},
)
