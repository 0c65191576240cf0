"""Print the OpenBLAS kernel ("core") NumPy's OpenBLAS runs with here: SkylakeX, Haswell, Sandybridge, ...

CI runs the tests a second time under an older kernel (OPENBLAS_CORETYPE) to prove that no stored output or
assert depends on the machine's own; OpenBLAS ignores a name it does not know, so CI checks the name took."""
import ctypes
import glob
import os

import numpy

here = os.path.dirname(numpy.__file__)
libs = sorted(glob.glob(os.path.join(here, "..", "numpy.libs", "*openblas*"))
              + glob.glob(os.path.join(here, ".dylibs", "*openblas*")))
for path in libs:
    lib = ctypes.CDLL(path)
    for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename64_",
                 "openblas_get_corename"):
        if hasattr(lib, name):
            fn = getattr(lib, name)
            fn.restype = ctypes.c_char_p
            print(fn().decode())
            raise SystemExit(0)
print("unknown")
