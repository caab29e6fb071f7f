"""Servable entry point: ``panel serve app/main.py``."""

import panel as pn
import scipy.linalg  # noqa: F401 (loads SciPy's own BLAS, which the limit below must reach)
from threadpoolctl import threadpool_limits

# Each session steps small matrices: one BLAS thread per process avoids oversubscribing
# the cores that many sessions (and the browser, on a laptop) share.
threadpool_limits(1)

from app import Dashboard  # noqa: E402 (after limiting the BLAS threads)

pn.extension("katex")

Dashboard().servable(title="Nonequilibrium attention dynamics")
