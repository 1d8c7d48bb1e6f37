"""Repository-wide pytest configuration.

Makes ``import helpers`` work in the test process and in every notebook kernel that nbval
starts (kernels inherit this environment), without anyone setting PYTHONPATH by hand.
"""

import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
_paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
if str(ROOT) not in _paths:
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *_paths])

# nbval's kernels: started again when one loses the race for its ports, and any other failed
# start shows the kernel's standard error (tools/kernel_start.py)
from tools.kernel_start import install as _install_kernel_start  # noqa: E402

_install_kernel_start()
