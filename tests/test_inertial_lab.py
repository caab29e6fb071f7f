"""Fast UI test of the inertial lab: drive it through its parameters, check plot data."""

import numpy as np
import pytest

pn = pytest.importorskip("panel")

from app.inertial_lab import InertialLab, load_presets  # noqa: E402


def _all_finite(source):
    for value in source.data.values():
        for item in (value if len(value) and np.ndim(value[0]) else [value]):
            arr = np.asarray(item)
            if arr.dtype.kind in "fiu":
                assert np.all(np.isfinite(arr))


def test_presets_are_valid():
    presets, errors = load_presets()
    assert not errors and len(presets) == 5


def test_each_preset_runs_with_finite_data():
    lab = InertialLab()
    assert lab.__panel__() is not None
    presets, _ = load_presets()
    for p in presets:
        lab.preset = p["name"]
        assert not lab.message.visible, lab.message.object
        sources = [lab.eig_first, lab.eig_acc, lab.cloud0, lab.cloud1, lab.ham_src,
                   *lab.clouds_cmp.values(), *lab.layer_src.values(), *lab.soft_src.values()]
        for src in sources:
            _all_finite(src)
        assert len(lab.eig_first.data["xs"]) == lab.settings.dim
        if p["name"].startswith("first-order"):
            span, _ = lab.tmax_marker
            assert span.visible and span.location == pytest.approx(1.0, abs=1e-9)
            lam_end = max(y[-1] for y in lab.eig_first.data["ys"])
            assert lam_end > 1e6  # the curve reaches the blow-up
        if p["name"].startswith("V"):
            assert not lab.tmax_marker[0].visible and not lab.tacc_marker[0].visible
        if p["name"].startswith("momentum"):
            assert lab.tacc_marker[0].location == pytest.approx(2.76, abs=0.02)
        if p["name"].startswith("effective"):
            pred, act = lab.pred_marker[0].location, lab.actual_marker[0].location
            assert abs(pred - act) <= 3
        assert "T_max" in lab.status.object


def test_bad_input_shows_message():
    lab = InertialLab()
    lab.kernel_input.value = "1, 2, 3"
    assert lab.run() is False
    assert lab.message.visible and "A diagonal" in lab.message.object
    lab.kernel_input.value = "1"
    assert lab.run() is True and not lab.message.visible
