"""Servable entry point: ``panel serve app/main.py`` (``--args --max-fps N
--steps-per-frame N``: every session's default frame cap and speed,
:func:`app.serving.arguments.server_defaults`)."""

import sys

import panel as pn
import scipy.linalg  # noqa: F401 (loads SciPy's own BLAS, which the limit below must reach)
from threadpoolctl import threadpool_limits

# Each session steps small matrices: one BLAS thread per process avoids oversubscribing
# the cores that many sessions (and the browser, on a laptop) share.
threadpool_limits(1)

from panel.io.resources import LOCAL_DIST  # noqa: E402

from app import Dashboard  # noqa: E402 (after limiting the BLAS threads)
from app.serving.arguments import server_defaults  # noqa: E402

# Panel's components link their stylesheets from its CDN until the page of the session is
# rendered, where the links are turned to the server's copy; a session created while
# another is destroyed (a tab closed as one opens) kept the CDN links, and offline (a
# lecture hall) its widgets lost their styles. The server's copy, from the start:
if pn.state.curdoc is not None:  # (none when the file is run outside a server)
    pn.state.curdoc._template_variables.setdefault("dist_url", LOCAL_DIST)
pn.extension("katex")

# (the arguments after ``panel serve … --args``): defaults, not settings of the page, so
# a URL leaves them out
for name, value in server_defaults(sys.argv[1:]).items():
    Dashboard.param[name].default = value

Dashboard().servable(title="Nonequilibrium attention dynamics")
