"""Issue #27 (a lecture-ready page), the views: heatmaps' colour scale and pointing at a
token, the Noise ensemble's bounds, progress and first result, the Sweep tab's first
result and its cancel, the inertial lab's stale notice, pinned runs and quench markers.
The browser tests are in ``tests/ui/test_views_page_browser.py``."""

from __future__ import annotations

import numpy as np
from dashboard_support import play

from app.dashboard import Dashboard
from app.heatmaps import SCALES
from dynamics import Settings


# -- heatmaps ---------------------------------------------------------------------
def test_heatmaps_default_to_the_data_range():
    d = Dashboard(settings=Settings(), playing=False)
    play(d, 2)
    h = d.heatmaps
    assert h.color_scale == SCALES[1]
    mapper = h.fig_attention.renderers[0].glyph.color_mapper
    A, A_star = h.attention.data["image"][0], h.softmax.data["image"][0]
    lo, hi = min(A.min(), A_star.min()), max(A.max(), A_star.max())
    assert (mapper.low, mapper.high) != (0.0, 1.0)
    assert mapper.low <= lo and hi <= mapper.high
    # the entries fill at least half the scale: not a dark block
    assert hi - lo >= (mapper.high - mapper.low) / 1.5


def test_a_click_on_a_row_points_at_its_token_everywhere():
    """The maps and the token plot answer a click (the page's script: browser test)."""
    d = Dashboard(settings=Settings(), playing=False)
    h, tr = d.heatmaps, d.trajectories
    for fig in (*h.figures, tr.fig):
        scripts = fig.js_event_callbacks.get("tap", [])
        assert len(scripts) == 1
        assert scripts[0].args["rows"] is h.rows and scripts[0].args["chosen"] is tr.chosen
    # a run with another N forgets the token pointed at
    h.rows.data = {"y0": [2.5], "y1": [3.5]}
    tr.chosen.indices = [3]
    d.settings.n_tokens = 5
    play(d, 1)
    assert h.rows.data["y0"] == [] and tr.chosen.indices == []
    assert np.asarray(h.attention.data["image"][0]).shape == (5, 5)

