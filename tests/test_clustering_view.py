"""The clustering view (app/mainview/clustering.py), driven through the Dashboard without a browser:
what it draws is checked against independent computations (an eigen-decomposition for
``e^{−tW_V}``, the frame's own diagnostics, the geometry of the orthographic view)."""

import numpy as np
import pytest

from app import Dashboard, presets
from app.mainview.clustering import ROLLOVER, clustering_mode, sphere_view, view_basis
from dynamics import Settings, models
from dynamics import clustering as cl


def test_the_view_serves_the_models_the_registry_says():
    modes = {name: clustering_mode(name) for name in models.names(part=1)}
    assert modes["sphere"] == "on_sphere" and modes["transformer"] == "rescaled"
    assert {m for m, mode in modes.items() if mode is None} == set(modes) - {
        "sphere", "transformer"}


def test_orthographic_view_of_the_sphere():
    B = view_basis()
    np.testing.assert_allclose(B @ B.T, np.eye(3), atol=1e-15)
    rng = np.random.default_rng(0)
    X = cl.unit_rows(rng.standard_normal((20, 3)))
    xy, depth, axes = sphere_view(X)
    np.testing.assert_allclose(xy**2 @ np.ones(2) + depth**2, 1.0, atol=1e-14)
    assert np.all(np.hypot(xy[:, 0], xy[:, 1]) <= 1 + 1e-15)
    assert np.any(depth < 0) and np.any(depth > 0)  # both hemispheres are told apart
    xy2, depth2, _ = sphere_view(X[:, :2] / np.linalg.norm(X[:, :2], axis=1, keepdims=True))
    np.testing.assert_allclose(np.hypot(xy2[:, 0], xy2[:, 1]), 1.0)
    assert np.all(depth2 == 1.0)


def test_high_dimensions_use_the_first_two_principal_axes_without_flipping():
    rng = np.random.default_rng(1)
    X = cl.unit_rows(rng.standard_normal((30, 6)) * [5, 3, 1, 1, 1, 1])
    xy, _, axes = sphere_view(X)
    lam, vecs = np.linalg.eigh(X.T @ X)
    for k in range(2):  # the top eigenvectors, up to sign
        assert abs(axes[k] @ vecs[:, -1 - k]) == pytest.approx(1.0, abs=1e-12)
    _, _, again = sphere_view(X, previous=-axes)
    np.testing.assert_allclose(again, -axes, atol=1e-12)  # the signs follow the last frame
    assert np.all(np.hypot(xy[:, 0], xy[:, 1]) <= 1 + 1e-12)


def _preset(name):
    (preset,) = [p for p in presets.load_presets() if p["name"] == name]
    return preset


def test_the_clustering_preset_streams_tokens_similarity_energy_and_clusters():
    dash = Dashboard(playing=False)
    assert dash.load_preset(_preset("Clustering on the sphere"))
    view = dash.clustering
    assert all(f.visible for f in view.figures) and not view.rescaled_toggle.visible
    for _ in range(30):
        dash.advance_frame()
    frame = dash.sim.frame()
    d = frame.diagnostics
    series = view.series.data
    assert len(series["t"]) == 31 and series["t"][-1] == pytest.approx(frame.t)
    assert np.all(np.diff(series["energy"]) >= 0)  # Eᵦ rises
    assert series["energy"][-1] == pytest.approx(d["hamiltonian"], rel=1e-13)
    assert series["energy_max"][-1] == pytest.approx(32**2 * np.e / 2, rel=1e-13)
    count = cl.cluster_labels(frame.features, 0.01)[0]
    assert series["clusters"][-1] == count and series["clusters"][0] == 31 > count
    G = view.similarity.data["image"][0]
    assert G.shape == (32, 32)
    np.testing.assert_allclose(np.diag(G), 1.0, atol=1e-6)
    np.testing.assert_allclose(np.sort(G.ravel()),
                               np.sort((frame.features @ frame.features.T).ravel()), atol=1e-6)
    xy, depth, _ = sphere_view(frame.features)
    np.testing.assert_allclose(view.tokens.data["x"], xy[:, 0])
    # a change of ε continues the run and changes the count at once
    dash.settings.cluster_eps = 0.5
    dash.advance_frame()
    assert view.series.data["clusters"][-1] < series["clusters"][-2]
    assert ROLLOVER >= 1000


def test_other_models_hide_the_view_and_the_unnormalised_flow_is_rescaled():
    dash = Dashboard(settings=Settings(model="canonical", n_tokens=6, dim=3), playing=False)
    view = dash.clustering
    assert not any(f.visible for f in view.figures)
    dash.advance_frame()
    assert len(view.series.data["t"]) == 0
    dash.settings.model = "transformer"
    assert view.mode == "rescaled" and view.rescaled_toggle.visible
    assert not view.fig_energy.visible and view.fig_tokens.visible
    for _ in range(20):
        dash.advance_frame()
    frame, W = dash.sim.frame(), dash.sim.problem.W_V
    lam, Q = np.linalg.eig(W)  # e^{−tW} from the eigen-decomposition, not expm
    E = ((Q * np.exp(-frame.t * lam)) @ np.linalg.inv(Q)).real
    Z = cl.unit_rows(frame.features @ E.T)
    xy, _, _ = sphere_view(Z)
    np.testing.assert_allclose(view.tokens.data["x"], xy[:, 0], atol=1e-10)
    assert "cos(z_i, z_j)" in view.fig_similarity.title.text
    view.rescaled = False  # the tokens themselves
    dash.advance_frame()
    frame = dash.sim.frame()
    xy, _, _ = sphere_view(cl.unit_rows(frame.features))
    np.testing.assert_allclose(view.tokens.data["x"], xy[:, 0], atol=1e-12)
    assert len(view.series.data["t"]) == 1  # a change of frame starts the series again
