import os
import sys

import scipy.linalg  # noqa: F401 (loads SciPy's own BLAS: the limit below must reach it)
from threadpoolctl import threadpool_limits

from .cli import main

# The steps multiply small matrices: one BLAS thread for each of NumPy's and SciPy's
# BLAS. With their default threads both pools spin on the same cores (a stiff canonical
# step at N = 128, d = 16 took 23 ms instead of 0.30 ms on two idle cores; `run --model
# canonical --n-tokens 128 --dim 16 --gamma 100 --t-end 2`, 5.7 s instead of 0.8 s).
threadpool_limits(1)

try:
    sys.exit(main())
except BrokenPipeError:  # e.g. `python -m dynamics run | head`: stop quietly
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(1)
