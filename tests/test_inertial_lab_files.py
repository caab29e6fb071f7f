"""The inertial lab with your own data: a weights file's ``X``, ``A``, ``V``, ``P`` replace
the generated data of every experiment (dynamics.inertial.experiments.file_data), in the
backend and in the lab's view (upload, refusal, back to generated data)."""

import io

import numpy as np
import pytest

from dynamics import Settings, Simulation
from dynamics.inertial import (
    integrate_until_blowup,
    linear_velocity,
    second_moment,
)
from dynamics.inertial.experiments import LAB_MAX_DIM, run_lab_experiment
from dynamics.inertial.linear import largest_eigenvalue

pn = pytest.importorskip("panel")

from app.lab.inertial_lab import UPLOAD_HELP, InertialLab  # noqa: E402


def _preset_settings():
    """The lab's preset with random (non-diagonal) A and V, d = 3."""
    return Settings(model="linear", kernel_diag="1, 0.5, 2", value_diag="1, 2, 0.5",
                    second_moment=0.4, n_tokens=12, dim=3, cloud="student_t",
                    matrix_draw="random", seed=7)


def _general(seed=3, n=10, d=3):
    """Symmetric ``A ≻ 0`` and ``V`` that do not commute, and tokens ``X``."""
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal((d, d))
    A = np.eye(d) + 0.3 * Q @ Q.T
    W = rng.standard_normal((d, d))
    V = 0.5 * (W + W.T) + np.eye(d)
    assert np.abs(A @ V - V @ A).max() > 0.1
    return 0.8 * rng.standard_normal((n, d)), A, V


def _npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def test_the_generated_data_given_as_a_file_give_the_same_run():
    """X(0), A, V of a generated run, given as arrays: every curve is the same; only the
    first-order T_max is found numerically (λ_max(S) reaching 1e8), within 1e-7 of the
    closed form 1/(2 a v s0)."""
    s = _preset_settings()
    r = run_lab_experiment(s)
    q = run_lab_experiment(s, arrays={"features": r.data.X0, "kernel": r.data.A,
                                      "value": r.data.V})
    assert q.data.a is None and r.data.a is not None
    assert q.first_order_time == pytest.approx(r.first_order_time, rel=1e-7)
    assert q.first_order_time != r.first_order_time
    assert q.accelerated_time == r.accelerated_time
    for got, want in ((q.first_order_eigenvalues, r.first_order_eigenvalues),
                      (q.accelerated_eigenvalues, r.accelerated_eigenvalues),
                      (q.cloud_moments.values(), r.cloud_moments.values()),
                      (q.layers.values(), r.layers.values()),
                      (q.softmax.values(), r.softmax.values()),
                      ((q.hamiltonian,), (r.hamiltonian,))):
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a.x, b.x)
            np.testing.assert_array_equal(a.y, b.y)
    assert (q.crossing_layer, q.predicted_layer) == (r.crossing_layer, r.predicted_layer)


def test_non_commuting_matrices_blow_up_when_the_particles_do():
    """For A, V, S(0) that do not commute (no closed form), the numerical T_max of the
    moment system is the time the particle flow ẋ_i = V S A x_i reaches λ_max(S) = 1e8
    (an independent run: N·d states instead of d²)."""
    X, A, V = _general()
    r = run_lab_experiment(Settings(model="linear"),
                           arrays={"features": X, "kernel": A, "value": V})
    n, d = X.shape
    particles = integrate_until_blowup(
        lambda t, y: linear_velocity(y.reshape(n, d), A, V).ravel(), X.ravel(), 40.0,
        lambda y: largest_eigenvalue(second_moment(y.reshape(n, d))), 1e8,
        rtol=1e-10, atol=1e-12)
    assert np.isfinite(r.first_order_time)
    assert r.first_order_time == pytest.approx(particles.time, rel=1e-6)
    np.testing.assert_array_equal(r.data.X0, X)
    assert (r.settings["n_tokens"], r.settings["dim"]) == (n, d)
    assert not r.messages or all(m.startswith("softmax_inertial") for m in r.messages)


def test_the_momenta_drive_the_second_order_softmax_models():
    X, A, V = _general()
    P = 0.5 * np.random.default_rng(9).standard_normal(X.shape)
    s = Settings(model="linear", alpha=0.0)
    at_rest = run_lab_experiment(s, arrays={"features": X, "kernel": A, "value": V})
    moving = run_lab_experiment(s, arrays={"features": X, "kernel": A, "value": V,
                                           "momenta": P})
    want = Simulation(s.copy(model="softmax_momentum", n_tokens=10, dim=3,
                             norm_limit=1e6),
                      features=X, kernel=A, value=V, momenta=P)
    want.step(5)
    curve = moving.softmax["softmax_momentum"]
    assert curve.y[1] == pytest.approx(want.frame().diagnostics["second_moment_max"],
                                       rel=1e-12)
    assert curve.y[1] != at_rest.softmax["softmax_momentum"].y[1]
    np.testing.assert_array_equal(moving.softmax["softmax_first_order"].y,
                                  at_rest.softmax["softmax_first_order"].y)
    # the moment systems start at rest either way
    np.testing.assert_array_equal(moving.accelerated_eigenvalues[0].y,
                                  at_rest.accelerated_eigenvalues[0].y)


def test_diagonals_are_read_only_for_a_matrix_the_file_lacks():
    X, A, V = _general()
    s = Settings(model="linear", kernel_diag="1, 2", value_diag="3, 4")  # d = 2: unused
    r = run_lab_experiment(s, arrays={"features": X, "kernel": A, "value": V})
    assert r.settings["kernel_diag"] == "1, 2"
    with pytest.raises(ValueError, match=r"A diagonal \(the file has no A\) needs 1 or d = 3"):
        run_lab_experiment(s, arrays={"features": X, "value": V})
    r = run_lab_experiment(s.copy(kernel_diag="2"), arrays={"features": X, "value": V})
    np.testing.assert_array_equal(r.data.A, 2 * np.eye(3))  # V's diagonal "3, 4" unread
    np.testing.assert_array_equal(r.data.V, V)
    # the same in a Simulation: a given matrix's diagonal is not read
    sim = Simulation(s.copy(model="linear", kernel_diag="2", n_tokens=10, dim=3),
                     features=X, value=V)
    np.testing.assert_array_equal(sim.problem.A, 2 * np.eye(3))


@pytest.mark.parametrize("arrays, words", [
    ({"score_matrix": np.eye(3)}, "; M belongs to the Part I models"),
    ({"score_matrix": np.eye(3), "value_matrix": np.eye(3)}, "; M and W_V belong to the"),
    ({"kernel": np.eye(2)}, r"A must have shape \(3, 3\)"),
    ({"momenta": np.ones((4, 3))}, r"P must have shape \(10, 3\)"),
    ({"kernel": np.triu(np.ones((3, 3)))}, "symmetric kernel A"),
    ({"value": np.triu(np.ones((3, 3)))}, "symmetric value matrix V"),
    ({"kernel": np.diag([1.0, -1.0, 1.0])}, "positive definite kernel A"),
    ({"value": np.full((3, 3), np.nan)}, "V has entries that are not finite"),
    ({"features": np.ones((10, 3))}, "span R"),
    ({"features": np.ones((2, 3))}, "span R|n_tokens >= dim"),
    ({"features": np.ones(5)}, r"X must be a matrix \(N, d\)"),
    ({"features": 1e4 * np.random.default_rng(0).standard_normal((10, 3))}, "rescale X"),
    ({"kernel": np.diag([1e-13, 1.0, 1.0])}, "condition number below 1e12"),
    ({"features": np.ones((4, LAB_MAX_DIM + 1))}, "at most"),
    ({"features": np.ones((2000, 3))}, "at most N = 64"),  # before the settings' bound
    ({"features": np.ones((1, 3))}, r"N ≥ 2, d ≥ 1, got shape \(1, 3\)"),
    ({"features": np.ones((5, 0))}, r"N ≥ 2, d ≥ 1, got shape \(5, 0\)"),
])
def test_refused_arrays_name_what_is_wrong(arrays, words):
    X, A, V = _general()
    given = {"features": X, "kernel": A, "value": V, **arrays}
    with pytest.raises(ValueError, match=words):
        run_lab_experiment(Settings(model="linear"), arrays=given)


def test_a_run_starting_past_its_threshold_stops_at_once():
    """The blow-up event fires on an upward crossing: a start above the threshold is
    blown up at t0 (it ran to t_max before: 160 s for a file with λ_max(S(0)) ≈ 1e8)."""
    calls = []

    def fun(t, y):
        calls.append(t)
        return y

    for y0 in (np.array([2.0]), np.array([np.inf])):
        run = integrate_until_blowup(fun, y0, 40.0, lambda y: float(y[0]), 1.0)
        assert run.time == 0.0 and not calls
        np.testing.assert_array_equal(run.t, [0.0])


def test_a_part_two_simulation_with_both_matrices_ignores_the_diagonals():
    """With A and V given, the diagonals need not fit d, and the cloud drawn from the
    seed is the one drawn without them (the generator draws the same)."""
    s = Settings(model="linear_accelerated", n_tokens=6, dim=3, matrix_draw="random")
    _, A, V = _general()
    mine = Simulation(s.copy(kernel_diag="1, 2"), kernel=A, value=V)
    seeded = Simulation(s)
    np.testing.assert_array_equal(mine.frame().features, seeded.frame().features)


# -- the view -----------------------------------------------------------------------
@pytest.fixture
def lab():
    lab = InertialLab()  # it opens on the base case (momentum on a quadratic) …
    lab.preset = "first-order blow-up at 1/(2 a v s)"  # … files run the attention plots
    return lab


def test_a_file_chosen_on_the_base_case_runs_the_attention_experiments():
    """The base case has no file: a file leaves it for the attention plots (from t0 = 1,
    the base case's t0 = 0 being one they cannot take); its generated data come back
    there too."""
    lab = InertialLab()
    assert lab.momentum and lab.settings.nesterov_t0 == 0.0
    X, A, V = _general()
    _upload(lab, "mine.npz", _npz(X=X, A=A, V=V))
    assert not lab.message.visible, lab.message.object
    assert not lab.momentum and lab.settings.model == "linear_accelerated"
    assert lab.settings.nesterov_t0 == 1.0 and lab.plot_area.shown[0] == "eigenvalues"
    assert "(numerical)" in lab.status.object
    assert lab.use_generated_data() and "first-order Tₘₐₓ = 1.000" in lab.status.object


def _upload(lab, name, data):
    lab.upload.filename = name
    lab.upload.value = data


def test_an_uploaded_file_runs_every_plot_and_says_so(lab):
    X, A, V = _general()
    _upload(lab, "mine.npz", _npz(X=X, A=A, V=V, P=0.1 * X))
    assert not lab.message.visible, lab.message.object
    assert "**Running mine.npz**: N = 10, d = 3 (X, P, A, V)" in lab.caption.object
    assert "mine.npz" in lab.upload_note.object and lab.preset is None
    assert lab.kernel_input.disabled and lab.value_input.disabled
    assert "(numerical)" in lab.status.object and lab.generated_button.visible
    assert (lab.settings.n_tokens, lab.settings.dim) == (10, 3)
    plots = lab.attention_plots
    np.testing.assert_array_equal(plots.cloud0.data["x"], X[:, 0])
    r = run_lab_experiment(lab.settings, arrays={"features": X, "kernel": A, "value": V,
                                                 "momenta": 0.1 * X})
    np.testing.assert_array_equal(plots.eig_first.data["ys"][2], r.first_order_eigenvalues[2].y)
    assert len(plots.eig_first.data["xs"]) == 3
    # Run again (a damping change) keeps the file's data
    lab.settings.alpha = 2.0
    assert lab.run()
    np.testing.assert_array_equal(plots.cloud0.data["x"], X[:, 0])
    assert "(numerical)" in lab.status.object


def test_a_refused_file_changes_nothing(lab):
    eig_first = lab.attention_plots.eig_first
    before = (lab.status.object, dict(eig_first.data), lab.settings.values())
    X, A, V = _general()
    for name, data, words in (
            ("skew.npz", _npz(X=X, A=A + np.triu(np.ones((3, 3)), 1), V=V), "symmetric"),
            ("partone.npz", _npz(X=X, M=np.eye(3)), "M belongs to the Part I"),
            ("junk.npz", b"not an archive", "not a .npz archive"),
            ("cut.npz", _npz(X=X, A=A)[:150], "cannot read it as a .npz file"),
            ("objects.npz", _npz(X=np.array([[1, "a"]], dtype=object)), "holds object"),
            ("nox.npz", _npz(A=A), "must hold the features X")):
        _upload(lab, name, data)
        assert lab.message.visible and lab.message.alert_type == "danger"
        assert lab.message.object.startswith(f"Not used: {name}")
        assert words in lab.message.object
        assert lab.arrays is None and lab.upload_note.object == UPLOAD_HELP
        assert (lab.status.object, dict(eig_first.data), lab.settings.values()) == before


def test_while_a_file_is_used_its_settings_are_greyed_out(lab):
    X, A, V = _general()
    _upload(lab, "mine.npz", _npz(X=X, A=A, V=V))
    for name in ("n_tokens", "dim", "cloud", "second_moment", "matrix_draw"):
        assert lab.controls[name].disabled, name
    assert not lab.controls["alpha"].disabled and not lab.controls["seed"].disabled
    assert lab.controls["n_tokens"].value == 10
    assert lab.use_generated_data()
    assert not any(w.disabled for w in lab.controls.values())
    _upload(lab, "onlyA.npz", _npz(X=X, A=A))  # V from its diagonal: typed, drawn
    assert not lab.value_input.disabled and not lab.controls["matrix_draw"].disabled


def test_a_refused_file_can_be_chosen_again_once_the_settings_fit(lab):
    """A d = 3 file without V needs a V diagonal of 1 or 3 values; refused with the
    lab's "1, 2" (d = 2), it runs when the same file is chosen again after a fix."""
    X, A, _ = _general()
    data = _npz(X=X, A=A)
    lab.value_input.value = "1, 2"
    lab.run()
    _upload(lab, "mine.npz", data)
    assert "Not used: mine.npz" in lab.message.object and "V diagonal" in lab.message.object
    lab.value_input.value = "0.5"
    _upload(lab, "mine.npz", data)
    assert not lab.message.visible and lab.arrays is not None


def test_back_to_generated_data_restores_its_settings_or_keeps_the_file(lab):
    """The generated data come back with the N, d and diagonals they had (not the V
    diagonal typed for the file's d = 3); if they cannot run, the file stays in use and
    the lab says so."""
    X, A, _ = _general()
    lab.value_input.value = "1, 2"  # d = 2
    assert lab.run()
    lab.value_input.value = "0.5"
    _upload(lab, "onlyA.npz", _npz(X=X, A=A))
    lab.value_input.value = "0.5, 1, 2"  # typed for the file's d = 3, and run
    assert lab.run() and lab.settings.value_diag == "0.5, 1, 2"
    assert lab.use_generated_data()
    assert (lab.settings.n_tokens, lab.settings.dim) == (16, 2)
    assert lab.settings.value_diag == "1, 2" and lab.value_input.value == "1, 2"
    # a run of the generated data that is refused leaves the file in use
    lab.controls["dim"].value = 3  # moved before the file: d = 3, the diagonals of d = 2
    _upload(lab, "again.npz", _npz(X=X, A=A, V=np.eye(3)))
    assert not lab.use_generated_data()
    assert "Still using the file" in lab.message.object and "V diagonal" in lab.message.object
    assert lab.arrays is not None and lab.generated_button.visible
    assert "(numerical)" in lab.status.object and "Running again.npz" in lab.caption.object


def test_back_to_generated_data_and_presets_leave_the_file(lab):
    first = lab.status.object
    X, A, V = _general()
    _upload(lab, "mine.npz", _npz(X=X, A=A, V=V))
    assert lab.arrays is not None
    assert lab.use_generated_data()
    assert lab.arrays is None and not lab.generated_button.visible
    assert not lab.kernel_input.disabled and "Running" not in lab.caption.object
    assert lab.status.object == first and (lab.settings.n_tokens, lab.settings.dim) == (16, 2)
    _upload(lab, "mine2.npz", _npz(X=X, A=A, V=V))
    assert lab.arrays is not None
    lab.preset = "effective depth"
    assert lab.arrays is None and lab.upload_note.object == UPLOAD_HELP
    assert "Running" not in lab.caption.object
    assert "(numerical)" not in lab.status.object
