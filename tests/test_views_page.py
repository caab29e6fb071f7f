"""Issue #27 (a lecture-ready page), the views: heatmaps' colour scale and pointing at a
token, the Noise ensemble's bounds, progress and first result, the Sweep tab's first
result and its cancel, the inertial lab's stale notice, pinned runs and quench markers.
The browser tests are in ``tests/ui/test_views_page_browser.py``."""

from __future__ import annotations

import numpy as np
import pytest
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



# -- the noise ensemble ------------------------------------------------------------
def test_the_ensemble_widgets_take_the_views_bounds_and_refuse_by_name():
    from app.ensemble import EnsembleView

    view = EnsembleView(settings=Settings(model="attention", n_tokens=3, dim=2,
                                          logit_noise=0.3))
    lo, hi = view.param.replicas.bounds
    assert (view.replicas_input.start, view.replicas_input.end) == (lo, hi) == (2, 256)
    view.t_end_input.value = 30.0  # above the old hidden maximum of 20: taken
    assert view.t_end == 30.0 and "not accepted" not in view.message.object
    view.t_end_input.value = 2000.0
    assert view.t_end == 30.0 and view.t_end_input.value == 30.0
    assert "t_end = 2000.0 not accepted" in view.message.object
    assert "between 0.01 and 1000" in view.message.object
    view.t_end_input.value = -1.0
    assert view.t_end == 30.0 and "t_end = -1.0 not accepted" in view.message.object


def test_the_ensemble_tab_opens_with_an_example_and_says_how_to_run_ones_own():
    from app.dashboard import TABS

    d = Dashboard(settings=Settings(n_tokens=4, dim=2, dt=0.02), playing=False)
    assert d.settings.logit_noise == 0.0  # the default: no band of its own
    tabs = d.__panel__()[-1]
    tabs.active = TABS.index("Noise ensemble")
    view = d.ensemble
    data = view.source.data
    assert len(data["t"]) > 1 and data["t"][-1] == pytest.approx(view.t_end)
    spread = np.asarray(data["kl_hi"]) - np.asarray(data["kl_lo"])
    assert spread[-1] > 0  # bands, not one line
    text = view.message.object
    assert text.startswith("**Example shown at first** (σ = 0.5: the main tab's σ is 0)")
    assert "press **Run ensemble**" in text and not view.progress.visible
    assert d.settings.logit_noise == 0.0  # the example changed no setting


# -- the inertial lab ---------------------------------------------------------------
def test_the_inertial_lab_says_when_its_plots_are_stale():
    from app.inertial_lab import InertialLab

    lab = InertialLab()  # opens on its first preset, run
    assert lab.status.object and not lab.stale.visible
    lab.settings.theta = lab.settings.theta + 5.0
    assert lab.stale.visible and "Press **Run**" in lab.stale.object
    lab.run()
    assert not lab.stale.visible
    lab.kernel_input.value = "2,1"
    assert lab.stale.visible
    lab.kernel_input.value = lab.settings.kernel_diag  # back to the values shown
    assert not lab.stale.visible
