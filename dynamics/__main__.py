import os
import sys

import scipy.linalg  # noqa: F401 (loads SciPy's own BLAS: the limit below must reach it)
from threadpoolctl import threadpool_limits

from .cli import main

# The steps multiply small matrices: one BLAS thread for each of NumPy's and SciPy's
# BLAS. With their default threads both pools spin on the same cores (a stiff canonical
# step at N = 128, d = 16 took 31.5 ms instead of 0.68 ms on two cores).
threadpool_limits(1)

try:
    sys.exit(main())
except BrokenPipeError:  # e.g. `python -m dynamics run | head`: stop quietly
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(1)
