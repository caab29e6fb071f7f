"""The inertial lab's page (issue #35, items 1, 2, 6 and 11): the plots of the run shown
are the only ones on the page (rows rebuilt, never hidden), the sidebar shows the
essentials first and the rest in groups, only the settings the run reads, projector mode
keeps a preset's own plots, and a softmax model a preset cannot run is a note, not an
error. The pixels are the browser tier's (tests/ui/test_inertial_lab_browser.py)."""

import json

import panel as pn
import pytest

from app.lab.inertial_lab import InertialLab, load_presets, softmax_note
from app.lab.plot_area import ATTENTION, MOMENTUM, PROJECTOR_HEIGHT, PlotArea
from app.lab.sidebar import ESSENTIALS, GROUPS, shown
from dynamics.inertial.momentum import MOMENTUM_MODEL
from dynamics.settings import Settings


@pytest.fixture(scope="module")
def lab():
    return InertialLab()


def _page_figures(viewable) -> list:
    """The Bokeh figures of the panes in ``viewable``'s layout, as laid out now."""
    figures = []
    for obj in viewable.select(pn.pane.Bokeh):
        figures.append(obj.object)
    return figures


def test_only_the_runs_plots_are_in_the_layout_never_hidden_rows(lab):
    """A figure first drawn inside a hidden row (or the wrapping FlexBox of the base case)
    kept an empty frame once shown: the rows hold only the plots shown, and none of
    them is hidden."""
    presets, _ = load_presets()
    for name, expected in ((presets[0]["name"], lab.momentum_plots.figures),
                           (presets[1]["name"], lab.attention_plots.figures),
                           (presets[0]["name"], lab.momentum_plots.figures)):
        lab.preset = name
        assert _page_figures(lab.plot_area.column) == list(expected), name
        assert lab.shown_figures() == list(expected)
        assert not any(isinstance(row, pn.FlexBox) for row in lab.plot_area.column)
        assert all(row.visible for row in lab.plot_area.column)
        assert all(fig.height == 300 and fig.visible for fig in expected)


def test_the_hamiltonian_axes_are_set_from_its_data(lab):
    """The Hamiltonian's ranges come from its curve (BokehJS left an auto range of a
    figure first drawn hidden unset: an empty panel without axes)."""
    for name in ("first-order blow-up at 1/(2 a v s)", "V ⪯ 0: global existence"):
        lab.preset = name
        fig, data = lab.attention_plots.ham_fig, lab.attention_plots.ham_src.data
        assert type(fig.x_range).__name__ == type(fig.y_range).__name__ == "Range1d"
        assert len(data["H"]) > 10, name
        assert fig.y_range.start < min(data["H"]) <= max(data["H"]) < fig.y_range.end
        assert fig.x_range.start <= data["t"][0] and data["t"][-1] <= fig.x_range.end


def test_a_softmax_model_a_preset_cannot_run_is_a_neutral_note(lab):
    """Step 18 (V ⪯ 0): no error-styled message; a note under the plots says what the
    softmax plot leaves out and why — not under this preset, which is about other plots
    (a teaching preset shows no fine print, issue #35), but once its plots are no longer
    the preset's (a file loaded, your own settings); the status line is the run's."""
    lab.preset = "V ⪯ 0: global existence"
    assert not lab.message.visible and not lab.note.visible
    lab.focus = []  # (what loading a file does): the note is shown
    lab.projector = not lab.projector  # (laid out again)
    lab.projector = not lab.projector
    assert lab.note.visible and lab.note.object.startswith("ℹ")
    assert "softmax_inertial needs B = V A⁻¹ positive definite" in lab.note.object
    assert "softmax_inertial" not in lab.status.object
    lab.preset = "softmax attention with momentum"
    assert not lab.note.visible and lab.note.object == ""
    assert softmax_note(()) == ""
    assert softmax_note(("m: m cannot", "k: no")) .endswith("m cannot; k: no.")


def test_the_sidebar_shows_the_essentials_then_groups(lab):
    """Item 11: the preset and Run first, at most seven essentials, then collapsed
    groups; every control of the lab is in one of them."""
    essentials, *cards = lab.sidebar.column
    first = list(essentials)
    assert first[0].name == "Preset" and first[1] is lab.run_button
    assert len(first) == 2 + len(ESSENTIALS) <= 9
    assert all(isinstance(card, pn.Card) and card.collapsed for card in cards)
    listed = set(ESSENTIALS) | {n for _, names in GROUPS for n in names}
    assert listed == set(lab.controls) | {"kernel_diag", "value_diag"}
    file_card = lab.sidebar.groups["Your own data (.npz)"][0]
    assert lab.upload in file_card.objects and lab.generated_button in file_card.objects


def test_only_the_settings_the_run_reads_are_shown(lab):
    """The base case reads no V, no damping schedule, no layers; the Nesterov r and t0
    only with the Nesterov damping; a group of hidden settings is hidden."""
    presets, _ = load_presets()
    lab.preset = presets[0]["name"]
    base = lab.sidebar.visible_settings()
    assert {"value_diag", "damping", "layer_h", "theta"}.isdisjoint(base)
    assert {"kernel_diag", "alpha", "nesterov_r", "nesterov_t0"} <= set(base)
    assert not lab.sidebar.groups["Layers (effective depth)"][0].visible
    lab.preset = "first-order blow-up at 1/(2 a v s)"  # constant damping
    attention = lab.sidebar.visible_settings()
    assert {"value_diag", "damping", "layer_h", "theta"} <= set(attention)
    assert {"nesterov_r", "nesterov_t0"}.isdisjoint(attention)
    assert lab.sidebar.groups["Layers (effective depth)"][0].visible
    lab.settings.damping = "nesterov"
    assert {"nesterov_r", "nesterov_t0"} <= set(lab.sidebar.visible_settings())
    # the rule itself, for every Part II model
    for model in Settings.param.model.objects:
        for damping in ("constant", "nesterov"):
            base_case = model == MOMENTUM_MODEL
            assert shown("theta", model, damping) is not base_case
            assert shown("nesterov_r", model, damping) is (base_case or damping == "nesterov")


def test_projector_mode_keeps_a_presets_own_plots_taller_and_undoes(lab):
    """Item 6: in projector mode a preset shows only its own plots (its ``focus``: one
    or two), taller, without toolbars, the sidebar a drawer, no caption, status or
    equations; off, everything is back."""
    presets, _ = load_presets()
    lab.preset = "V ⪯ 0: global existence"
    lab.projector_scale = 1.0
    lab.projector = True
    try:
        plots = lab.attention_plots
        assert lab.shown_figures() == [plots.eig_fig, plots.ham_fig]
        assert _page_figures(lab.plot_area.column) == [plots.eig_fig, plots.ham_fig]
        assert len(lab.plot_area.column) == 1  # one row
        assert all(f.height == PROJECTOR_HEIGHT and f.toolbar_location is None
                   for f in lab.shown_figures())
        assert not lab.caption.visible and not lab.status.visible
        assert not lab.explanation_column.visible and not lab.note.visible
        assert lab.controls_toggle.visible and not lab.sidebar.column.visible
        lab.controls_toggle.value = True  # the drawer
        assert lab.sidebar.column.visible
        assert lab.sidebar.column.styles["position"] == "fixed"
        lab.controls_toggle.value = False
        for p in (presets[0], presets[-1]):  # (every preset's focus: the test below)
            lab.preset = p["name"]
            assert list(lab.plot_area.shown) == p["focus"], p["name"]
        lab.projector_scale = 1.5
        assert all(f.height == round(1.5 * PROJECTOR_HEIGHT) for f in lab.shown_figures())
    finally:
        lab.projector = False
    lab.preset = "V ⪯ 0: global existence"
    assert lab.shown_figures() == list(lab.attention_plots.figures)
    assert all(f.height == 300 and f.toolbar_location == "right" for f in lab.figures)
    assert lab.caption.visible and lab.status.visible and lab.explanation_column.visible
    assert lab.sidebar.column.visible and not lab.controls_toggle.visible
    assert lab.sidebar.column.styles == {}


def test_every_preset_names_its_own_plots_and_a_bad_name_is_refused(tmp_path):
    presets, errors = load_presets()
    assert not errors
    for p in presets:
        own = MOMENTUM if p["settings"]["model"] == MOMENTUM_MODEL else ATTENTION
        assert 1 <= len(p["focus"]) <= 2 and set(p["focus"]) <= set(own), p["name"]
        assert PlotArea.order(own == MOMENTUM, p["focus"], projector=True) == tuple(p["focus"])
        assert PlotArea.order(own == MOMENTUM, p["focus"]) == own
    bad = tmp_path / "presets.json"
    bad.write_text(json.dumps([{**presets[1], "focus": ["no such plot"]}]), encoding="utf-8")
    good, errors = load_presets(str(bad))
    assert good == [] and "no such plot" in errors[0]
