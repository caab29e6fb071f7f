"""Server-side cost of one dashboard frame: ``python scripts/bench_tick.py [N] [MODEL]``.

Builds the dashboard into a Bokeh document (as ``panel serve`` does, without a
browser) and times ``advance_frame``: ``steps_per_frame`` integrator steps, one
frame, and the updates of every ColumnDataSource under one document hold.
"""

import sys
import time

import panel as pn
from bokeh.document import Document
from panel.io.state import set_curdoc

from app import Dashboard
from dynamics import Settings

N = int(sys.argv[1]) if len(sys.argv) > 1 else 64
MODEL = sys.argv[2] if len(sys.argv) > 2 else "canonical"
doc = Document()
with set_curdoc(doc):
    dash = Dashboard(settings=Settings(n_tokens=N, model=MODEL), playing=False)
    doc.add_root(pn.panel(dash).get_root(doc))
    for _ in range(10):
        dash.advance_frame()
    start = time.perf_counter()
    for _ in range(100):
        dash.advance_frame()
    total = (time.perf_counter() - start) / 100 * 1e3
    print(f"N = {N}, model {MODEL}, t = {dash.sim.t:.2f} ({dash.sim.status}): "
          f"{total:.1f} ms per frame "
          f"({dash.compute_ms:.1f} ms of it simulation, {dash.steps_per_frame} steps)")
