"""The inertial lab: its experiments (dynamics.inertial.experiments) against direct calls of
the dynamics, and the view driven through its parameters (plot data checked)."""

import subprocess
import sys

import numpy as np
import pytest

from dynamics import Settings, Simulation
from dynamics.inertial import (
    CLOUDS,
    Damping,
    accelerated_trajectory,
    first_order_blowup_time,
    initial_cloud,
    integrate_until_blowup,
    layer_crossing,
    linear_velocity,
    matrix_hamiltonian,
    model_matrices,
    moment_trajectory,
    parse_diagonal,
    second_moment,
)
from dynamics.inertial.experiments import run_lab_experiment
from dynamics.inertial.linear import largest_eigenvalue

pn = pytest.importorskip("panel")

from app.lab.inertial_lab import InertialLab, load_presets  # noqa: E402


def _all_finite(source):
    for value in source.data.values():
        for item in (value if len(value) and np.ndim(value[0]) else [value]):
            arr = np.asarray(item)
            if arr.dtype.kind in "fiu":
                assert np.all(np.isfinite(arr))


def test_presets_are_valid():
    presets, errors = load_presets()
    assert not errors and len(presets) == 7
    assert presets[0]["settings"]["model"] == "momentum_quadratic"  # the base case first


def test_each_preset_runs_with_finite_data():
    lab = InertialLab()
    assert lab.__panel__() is not None
    presets, _ = load_presets()
    for p in presets:
        lab.preset = p["name"]
        assert not lab.message.visible, lab.message.object
        plots, runs = lab.attention_plots, lab.momentum_plots
        if lab.momentum:  # the base case: its own plots
            for src in (*runs.gap_src.values(), *runs.path_src.values(), runs.bound_src):
                _all_finite(src)
                assert len(next(iter(src.data.values()))) > 100
            assert "f − f*" in lab.status.object
            continue
        for src in plots.sources:
            _all_finite(src)
        assert len(plots.eig_first.data["xs"]) == lab.settings.dim
        if p["name"].startswith("first-order"):
            span, _ = plots.tmax_marker
            assert span.visible and span.location == pytest.approx(1.0, abs=1e-9)
            lam_end = max(y[-1] for y in plots.eig_first.data["ys"])
            assert lam_end > 1e6  # the curve reaches the blow-up
        if p["name"].startswith("V"):
            assert not plots.tmax_marker[0].visible and not plots.tacc_marker[0].visible
        if p["name"].startswith("momentum"):
            assert plots.tacc_marker[0].location == pytest.approx(2.76, abs=0.02)
        if p["name"].startswith("effective"):
            pred, act = plots.pred_marker[0].location, plots.actual_marker[0].location
            assert abs(pred - act) <= 3
        assert "Tₘₐₓ" in lab.status.object


def test_bad_input_shows_message():
    lab = InertialLab()
    lab.kernel_input.value = "1, 2, 3"
    assert lab.run() is False
    assert lab.message.visible and "A diagonal" in lab.message.object
    lab.kernel_input.value = "1"
    assert lab.run() is True and not lab.message.visible


# -- the experiments (dynamics.inertial.experiments) --------------------------------------
def _lab_settings(preset_name):
    """The settings the lab runs a preset with (its start settings, then the preset's)."""
    settings = Settings(model="linear_accelerated", n_tokens=16, dim=2)
    (preset,) = [p for p in load_presets()[0] if p["name"] == preset_name]
    settings.param.update(**preset["settings"])
    return settings


def _same(curve, x, y, positive=True):
    """``curve`` holds exactly the finite points of ``(x, y)`` (and ``y > 0``)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = np.isfinite(x) & np.isfinite(y) & ((y > 0) if positive else True)
    np.testing.assert_array_equal(curve.x, x[keep])
    np.testing.assert_array_equal(curve.y, y[keep])


def test_experiments_equal_direct_calls_of_the_dynamics():
    """run_lab_experiment for one preset (random A and V, d = 3, Student-t cloud) equals
    the lab's experiments written out with the public functions of dynamics.inertial,
    and the softmax runs equal Simulation(settings).step(n) frame by frame."""
    s = _lab_settings("only the second moment matters")
    r = run_lab_experiment(s)
    assert r.settings == s.values()

    d, n = s.dim, s.n_tokens
    a, v = parse_diagonal(s.kernel_diag, d), parse_diagonal(s.value_diag, d)
    rng = np.random.default_rng(s.seed)
    A, V = model_matrices(a, v, d, s.matrix_draw, rng)
    X0 = initial_cloud(s.cloud, n, d, s.second_moment, rng)
    S0, damping, P0 = second_moment(X0), Damping.from_settings(s), np.zeros((d, d))
    for got, want in ((r.data.A, A), (r.data.V, V), (r.data.X0, X0), (r.data.S0, S0)):
        np.testing.assert_array_equal(got, want)
    tol = {"rtol": 1e-8, "atol": 1e-10}

    # blow-up times, horizon, eigenvalues of S(t) of both moment systems
    t_first = first_order_blowup_time(a, v, np.full(d, s.second_moment))
    t_acc = accelerated_trajectory(A, V, S0, P0, damping, 40.0, threshold=1e8,
                                   **tol).blowup_time
    assert np.isfinite(t_first) and np.isfinite(t_acc)
    assert (r.first_order_time, r.accelerated_time) == (t_first, t_acc)
    horizon = min(40.0, 1.2 * max(t_first, t_acc, 1.0))
    assert r.horizon == horizon
    t_eval = np.linspace(0, horizon, 300)
    first = moment_trajectory(S0, A, V, horizon, t_eval=t_eval, threshold=1e8, **tol)
    acc = accelerated_trajectory(A, V, S0, P0, damping, horizon, t_eval=t_eval,
                                 threshold=1e8, **tol)
    for curves, run in ((r.first_order_eigenvalues, first), (r.accelerated_eigenvalues, acc)):
        assert len(curves) == d
        for k, curve in enumerate(curves):
            _same(curve, run.t, np.linalg.eigvalsh(run.S)[:, k])

    # the first-order particle flow: the later cloud, and three cloud shapes
    def flow(t, y):
        return linear_velocity(y.reshape(n, d), A, V).ravel()

    def size(y):
        return largest_eigenvalue(second_moment(y.reshape(n, d)))

    assert r.cloud_time == 0.9 * t_first
    X1 = integrate_until_blowup(flow, X0.ravel(), 0.9 * t_first, size, 1e8, **tol).y[-1]
    np.testing.assert_array_equal(r.later_cloud, X1.reshape(n, d))
    t_cloud = np.linspace(0, horizon, 150)
    assert list(r.cloud_moments) == list(CLOUDS)
    for kind in CLOUDS:
        Xk = initial_cloud(kind, n, d, S0, np.random.default_rng(s.seed + 1))
        run = integrate_until_blowup(flow, Xk.ravel(), horizon, size, 1e8, t_eval=t_cloud,
                                     **tol)
        _same(r.cloud_moments[kind], run.t, [size(y) for y in run.y])

    # layers against the continuous accelerated system
    crossings = {scheme: layer_crossing(X0, A, V, s.layer_h, s.theta, scheme=scheme,
                                        damping=damping, t_max=40.0)
                 for scheme in ("euler", "kick_damp_drift")}
    for scheme, c in crossings.items():
        _same(r.layers[scheme], np.arange(len(c.moments)), c.moments)
    kdd = crossings["kick_damp_drift"]
    assert (r.crossing_layer, r.predicted_layer) == (kdd.layer, kdd.predicted)
    keep = acc.t / s.layer_h <= len(kdd.moments)
    _same(r.layers["continuous"], acc.t[keep] / s.layer_h,
          np.linalg.eigvalsh(acc.S)[keep, -1])
    assert r.theta == s.theta and r.layer_h == s.layer_h

    # H(S, P) along the accelerated system, up to where its terms, ½tr(ASP²S) and
    # ½tr(VS), reach 1000 times their start (the solver's error on them then shows)
    H = np.array([matrix_hamiltonian(Sk, Pk, A, V) for Sk, Pk in zip(acc.S, acc.P, strict=True)])
    size = np.array([abs(np.trace(A @ Sk @ Pk @ Pk @ Sk)) / 2 + abs(np.trace(V @ Sk)) / 2
                     for Sk, Pk in zip(acc.S, acc.P, strict=True)])
    stop = int(np.argmax(size > 1e3 * max(1.0, size[0])))
    assert 0 < stop < len(H) - 1 and np.all(np.isfinite(H))
    np.testing.assert_allclose(r.hamiltonian.x, acc.t[:stop], rtol=0, atol=0)
    np.testing.assert_allclose(r.hamiltonian.y, H[:stop], rtol=1e-14)

    # the softmax models, streamed 60 frames of 5 steps (fewer if they diverge)
    assert list(r.softmax) == ["softmax_inertial", "softmax_momentum", "softmax_first_order"]
    for model, curve in r.softmax.items():
        sim = Simulation(s.copy(model=model, norm_limit=1e6))
        frames = [sim.frame()]
        while len(frames) <= 60 and sim.status == "running":
            frames.append(sim.step(5))
        _same(curve, [f.t for f in frames], [f.diagnostics["second_moment_max"] for f in frames])
    assert r.messages == ()


def test_lab_shows_the_experiment_result_as_is():
    lab = InertialLab()
    lab.preset = "effective depth"
    r = run_lab_experiment(lab.settings)
    plots = lab.attention_plots
    np.testing.assert_array_equal(plots.eig_acc.data["xs"][1], r.accelerated_eigenvalues[1].x)
    np.testing.assert_array_equal(plots.eig_acc.data["ys"][1], r.accelerated_eigenvalues[1].y)
    np.testing.assert_array_equal(plots.cloud1.data["y"], r.later_cloud[:, 1])
    np.testing.assert_array_equal(plots.layer_src["continuous"].data["s"], r.layers["continuous"].y)
    np.testing.assert_array_equal(plots.soft_src["softmax_momentum"].data["t"],
                                  r.softmax["softmax_momentum"].x)
    assert plots.actual_marker[0].location == r.crossing_layer
    assert f"(predicted {r.predicted_layer})" in lab.status.object


@pytest.mark.parametrize("preset, conserved", [
    ("first-order blow-up at 1/(2 a v s)", True),  # α = 0: H conserved
    ("momentum delays but does not prevent blow-up", False)])  # α = 1: dH/dt ≤ 0
def test_the_hamiltonian_curve_shows_the_energy_law_up_to_the_blow_up(preset, conserved):
    """The curve stops before the solver's error on H's growing terms shows: an undamped
    run's H stays at H(0) to 2e-5 (it drifted by 3e-3 in the samples left out), a
    damped one's only falls; it reaches 97 % of the way to the blow-up time; the lab's
    axis spans at least 2 % of |H| (a conserved H is drawn flat)."""
    r = run_lab_experiment(_lab_settings(preset))
    H, t = r.hamiltonian.y, r.hamiltonian.x
    if conserved:
        assert np.abs(H - H[0]).max() <= 2e-5 * abs(H[0])  # measured 1.5e-5
    else:
        assert np.all(np.diff(H) <= 1e-12) and H[-1] < 10 * H[0]
    assert t[-1] >= 0.97 * r.accelerated_time
    lab = InertialLab()
    lab.preset = preset
    y_range = lab.attention_plots.ham_fig.y_range  # set from the data (not by BokehJS)
    span = y_range.end - y_range.start
    assert y_range.start < H.min() and H.max() < y_range.end
    if conserved:  # what is left of the drift is under 0.5 % of the axis (1.5 px): flat
        assert np.ptp(H) <= 5e-3 * span  # measured 0.13 %
        assert span >= 0.02 * np.abs(H).max()
    else:  # the fall fills the axis
        assert np.ptp(H) >= 0.8 * span
    x_range = lab.attention_plots.ham_fig.x_range
    assert x_range.start <= t[0] and t[-1] <= x_range.end <= t[-1] + 0.1 * (t[-1] - t[0])


def test_a_refused_setting_or_diagonal_raises_and_names_it():
    s = Settings(model="linear_accelerated", n_tokens=16, dim=2)
    with pytest.raises(ValueError, match="V diagonal"):
        run_lab_experiment(s, value_diag="1, 2, 3")
    with pytest.raises(ValueError, match="A diagonal"):
        run_lab_experiment({"dim": 3, "kernel_diag": "one"})
    with pytest.raises(ValueError, match="n_tokens"):
        run_lab_experiment(s, n_tokens=0)
    assert s.value_diag == "1"  # the settings given are not changed


def test_the_experiments_import_no_plotting_library():
    code = ("import sys, dynamics.inertial.experiments; "
            "print(sorted({'panel', 'bokeh', 'holoviews'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"
