"""What this package was built against. setup.py writes the installed copy of this file (the version and the path
of the shared library it found); this copy, in the source tree, reads the version from the header beside it."""

import os
import re

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include", "typedecide.h")) as _f:
    VERSION = re.search(r'^#define TD_VERSION_STRING "([0-9.]+)"$', _f.read(), re.M).group(1)
LIBRARY = None
