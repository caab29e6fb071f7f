"""Compare runs (issue #16, item 4): pinned runs round-trip through their NetCDF file,
a bad file is refused with a clear error, and the dashboard's ghosts carry the pinned
data after a new run, labelled by the settings in which the runs differ."""

import numpy as np
import pytest
from dashboard_support import play, small_dashboard

from app.mainview import export
from app.mainview.ranges import LOG_FLOOR
from app.teaching import pinned, run_record
from app.teaching.run_record import RunRecord
from app.teaching.slides import run_frames
from dynamics import Settings


def record(**values) -> RunRecord:
    settings = Settings(**{"n_tokens": 5, "dim": 3, **values})
    frames, _ = run_frames(settings, 0.3)
    return RunRecord.from_frames(settings, frames)


def test_file_round_trip_keeps_settings_and_curves():
    runs = [record(beta=1.0), record(beta=4.0, n_tokens=7, dim=2),
            record(model="attention", path="rotation", omega=2.0), record(model="linear")]
    back = run_record.from_netcdf(run_record.to_netcdf(runs))
    assert len(back) == 4
    for a, b in zip(runs, back, strict=True):
        assert b.settings == a.settings
        assert all(type(b.settings[k]) is type(v) for k, v in a.settings.items())
        np.testing.assert_array_equal(b.times, a.times)
        np.testing.assert_array_equal(b.features, a.features)
        for k in run_record.CURVES:  # NaN where the model does not define a curve
            np.testing.assert_array_equal(b.curves[k], a.curves[k])
    assert back[1].features.shape[1:] == (7, 2)


def test_record_keeps_at_most_max_frames_first_and_last():
    settings = Settings(n_tokens=4, dim=2)
    frames, _ = run_frames(settings, 2.0, max_frames=200)
    rec = RunRecord.from_frames(settings, frames, max_frames=50)
    assert len(rec.times) == 50
    assert rec.times[0] == frames[0].t and rec.times[-1] == frames[-1].t
    with pytest.raises(ValueError, match="no frames"):
        RunRecord.from_frames(settings, [])


def test_bad_files_give_clear_errors():
    with pytest.raises(ValueError, match="not a NetCDF file of pinned runs"):
        run_record.from_netcdf(b"this is not a NetCDF file")
    # a run's download (app.mainview.export) is NetCDF, but not a file of pinned runs
    d = small_dashboard()
    with pytest.raises(ValueError, match="not a file of pinned runs: its format attribute"):
        run_record.from_netcdf(export.netcdf_bytes(d).getvalue())
    ds = run_record.to_dataset([record()])
    ds.attrs["run0_settings"] = ds.attrs["run0_settings"].replace('"beta": 1.0', '"beta": -1.0')
    with pytest.raises(ValueError, match=r"(?s)pinned run 0: invalid settings:.*beta must be"):
        run_record.from_netcdf(bytes(ds.to_netcdf(engine="scipy")))
    ds = run_record.to_dataset([record()]).drop_vars("run0_kl")
    with pytest.raises(ValueError, match="pinned run 0: missing run0_kl"):
        run_record.from_netcdf(bytes(ds.to_netcdf(engine="scipy")))
    ds = run_record.to_dataset([record()])
    ds.attrs["run0_settings"] = "{beta"
    with pytest.raises(ValueError, match="pinned run 0: its settings are not JSON"):
        run_record.from_netcdf(bytes(ds.to_netcdf(engine="scipy")))


def test_labels_name_the_settings_that_differ():
    a, b = Settings(beta=1.0).values(), Settings(beta=4.0).values()
    assert run_record.comparison_labels(a, b) == ("β = 1", "β = 4")
    assert run_record.comparison_labels(a, a) == ("same settings", "same settings")
    line = run_record.settings_line(a)
    assert line.startswith("canonical · β = 1 · γ = 1 · σ = 0 · N = 8 · d = 4")
    assert "seed = 0" in line


def ghost_kl(d, slot=0):
    return np.asarray(d.pinned.curves[slot].data["kl"], dtype=float)


def test_ghosts_carry_the_pinned_run_after_a_new_run():
    d = small_dashboard()
    play(d, 8)
    first_run = list(d.history)
    kl = np.array([f.diagnostics["kl"] for f in first_run])
    d.pinned.pin()
    d.settings.beta = 4.0
    d.reset()
    play(d, 3)
    np.testing.assert_array_equal(ghost_kl(d), kl)
    np.testing.assert_array_equal(d.pinned.curves[0].data["kl_log"], np.maximum(kl, LOG_FLOOR))
    h = np.array([f.diagnostics["hamiltonian"] for f in first_run])
    np.testing.assert_array_equal(d.pinned.curves[0].data["d_energy"], h - h[0])
    # drawn, labelled by the difference, and within the plots' ranges
    ts = d.timeseries
    assert all(r.visible for r in d.pinned.renderers[0])
    assert len(d.pinned.renderers) == 1  # a slot is made for a pinned run only
    labels = [i.label.value for i in d.pinned.items[0]]
    assert labels == ["pinned: β = 1"] * 3
    assert ts.fig_kl_log.legend[0].title == "this run: β = 4"
    assert ts.fig_kl_log.x_range.end >= d.pinned.runs[0].times[-1] > d.sim.t
    # the tokens' ghost paths are on the new run's axes (same seed: same X(0))
    xs = d.pinned.paths[0].data["xs"]
    first = np.array([x[0] for x in xs]), np.array([y[0] for y in d.pinned.paths[0].data["ys"]])
    X0 = d.history[0].features
    now = d.trajectories.project(X0)
    np.testing.assert_allclose(np.column_stack(first), now, atol=1e-12)
    # a β change relabels; Clear hides every ghost
    d.settings.beta = 1.0
    assert [i.label.value for i in d.pinned.items[0]] == ["pinned: same settings"] * 3
    d.pinned.clear()
    assert not any(r.visible for rs in d.pinned.renderers for r in rs)
    assert ts.fig_kl_log.legend[0].title is None


def test_a_curve_the_pinned_model_lacks_is_not_drawn():
    """Value matching has no tracking bound (NaN in its record): its ghost bound is hidden,
    not drawn as a line at 0 (at the floor 1e-12 on the log plot, whose range it would
    stretch over a dozen decades); its KL and energy ghosts are drawn."""
    d = small_dashboard()
    d.settings.model = "value_matching"
    play(d, 8)
    kl = np.array([f.diagnostics["kl"] for f in d.history])
    assert np.all(np.isnan(d.pinned.pin().curves["kl_bound"])) and kl.min() > 1e-6
    ts = d.timeseries
    shown = {r.glyph.y: r.visible for r in d.pinned.renderers[0] if hasattr(r.glyph, "y")}
    assert shown == {"kl": True, "kl_bound": False, "kl_log": True, "kl_bound_log": False,
                     "d_energy": True, "y": True}
    assert ts.fig_kl_log.y_range.start > 0.1 * kl.min()


def test_save_and_load_through_the_dashboard():
    d = small_dashboard()
    play(d, 4)
    with pytest.raises(ValueError, match="no pinned runs to save"):
        d.pinned.save()
    d.pinned.pin()
    payload = d.pinned.save()
    d.pinned.clear()
    d.pinned.load(payload)
    np.testing.assert_array_equal(ghost_kl(d), [f.diagnostics["kl"] for f in d.history])
    for _ in range(pinned.MAX_PINNED + 1):  # the oldest goes
        d.pinned.load(payload)
    assert len(d.pinned.runs) == len(d.pinned.renderers) == pinned.MAX_PINNED
    models = len(d.timeseries.fig_kl_log.renderers)
    d.pinned.clear()
    d.pinned.load(payload)  # the slots are reused
    assert len(d.timeseries.fig_kl_log.renderers) == models


def test_bad_file_loaded_in_the_sidebar_says_so():
    d = small_dashboard()
    box = d.pinned.panel()
    assert box is not None
    d.pinned.buttons["load"].value = b"not a NetCDF file"
    # said under the picker, where the hand is (issue #27, item 9)
    assert d.pinned.load_note.object.startswith(
        "**Pinned runs not loaded:** not a NetCDF file of pinned runs")
    assert d.pinned.runs == []
