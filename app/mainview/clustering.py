"""The clustering view (Theory page: "Tokens on the sphere: clustering").

Four plots for the models whose tokens cluster:

* **tokens on the sphere**: in ``d = 3`` an orthographic view (the far hemisphere
  fainter), in ``d = 2`` the circle itself, in higher ``d`` the first two principal axes
  of the tokens (through the sphere's centre, so the unit circle still bounds them);
* **similarities** ``⟨x_i, x_j⟩`` on a fixed scale [−1, 1], tokens ordered by cluster
  (blocks appear as clusters form);
* **interaction energy** ``E_β(t)`` with its maximum ``N² e^β/(2β)``;
* **cluster count** over time: connected groups with ``⟨x_i, x_j⟩ > 1 − ε``, ε the
  ``cluster_eps`` setting.

Which models it serves is read from the registry: a model with an ``interaction_energy``
among its readable equations lives on the sphere; one with ``rescaled`` (the
unnormalised first-order flow) is shown in the frame ``z_i = e^{−t W_V} x_i``
(:attr:`Clustering.rescaled`; cosines in place of inner products). Other models hide
the view (a hidden figure takes no room in the layout).
"""

from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.models import ColorBar, ColumnDataSource, LinearColorMapper, Range1d
from bokeh.palettes import RdBu11, Turbo256
from bokeh.plotting import figure

from app.mainview.plots import legend_below
from app.models import spec
from dynamics import clustering as cl

#: Rows of the energy and cluster-count series kept (older rows roll over).
ROLLOVER = 5000
#: The fixed view of the sphere in d = 3: azimuth and elevation (radians).
AZIMUTH, ELEVATION = 0.6, 0.35
#: Side (px) of the square frame of the tokens on the sphere: equal scales on both axes,
#: so the unit circle is drawn round (a figure's width and height include its axes and
#: toolbar, which squashed it).
SPHERE_FRAME = 240
#: Opacity of tokens on the far hemisphere (d = 3).
FAR_ALPHA = 0.25


def view_basis(azimuth: float = AZIMUTH, elevation: float = ELEVATION) -> np.ndarray:
    """Orthonormal rows ``(right, up, towards the viewer)`` of the d = 3 view, (3, 3)."""
    ca, sa, ce, se = np.cos(azimuth), np.sin(azimuth), np.cos(elevation), np.sin(elevation)
    toward = np.array([ce * ca, ce * sa, se])
    right = np.array([-sa, ca, 0.0])
    return np.stack([right, np.cross(toward, right), toward])


def sphere_view(X: np.ndarray, previous: np.ndarray | None = None):
    """Plane coordinates, depth and the axes of tokens ``X`` (N, d).

    Parameters
    ----------
    X : ndarray, shape (N, d)
    previous : ndarray, shape (2, d), optional
        The axes of the last frame (d > 3): the new principal axes take their signs, so
        the picture does not flip from frame to frame.

    Returns
    -------
    xy : ndarray, shape (N, 2)
    depth : ndarray, shape (N,)
        Towards the viewer (d = 3), else 1 (every token in front).
    axes : ndarray, shape (2, d)
        The plane's axes: the view's (d = 3), the coordinate axes (d ≤ 2), the first two
        principal axes of the uncentred second moment ``XᵀX`` (d > 3).
    """
    N, d = X.shape
    depth = np.ones(N)
    if d == 3:
        basis = view_basis()
        axes, depth = basis[:2], X @ basis[2]
    elif d <= 2:
        axes = np.eye(2, d)
    else:
        _, vecs = np.linalg.eigh(X.T @ X)
        axes = vecs[:, ::-1][:, :2].T.copy()
        if previous is not None and previous.shape == axes.shape:
            signs = np.sign(np.einsum("ij,ij->i", axes, previous))
            axes *= np.where(signs == 0, 1.0, signs)[:, None]
    return X @ axes.T, depth, axes


def clustering_mode(model: str) -> str | None:
    """``"on_sphere"``, ``"rescaled"`` or None: what the view shows for ``model`` (from its
    spec's readable equations)."""
    readable = spec(model).readable
    if "interaction_energy" in readable:
        return "on_sphere"
    if "rescaled" in readable:
        return "rescaled"
    return None


class Clustering(pn.viewable.Viewer):
    """The clustering plots; :meth:`set_model` at a (re)start, :meth:`update` per frame."""

    rescaled = param.Boolean(
        default=True,
        doc="Unnormalised flow: show the rescaled tokens z_i = e^(−t W_V) x_i, where its "
            "clusters appear (else the tokens x_i themselves).")

    def __init__(self, **params):
        super().__init__(**params)
        self.mode = None
        self.axes = None
        self.colors = LinearColorMapper(palette=Turbo256[20:236], low=0, high=1)
        self.fig_tokens = figure(
            title="Tokens on the sphere", frame_width=SPHERE_FRAME, frame_height=SPHERE_FRAME,
            x_range=Range1d(-1.15, 1.15), y_range=Range1d(-1.15, 1.15),
            tools="pan,wheel_zoom,reset,save", toolbar_location="above")
        self.outline = self.fig_tokens.circle(x=[0.0], y=[0.0], radius=1.0, fill_color=None,
                                              line_color="#999999")
        self.tokens = ColumnDataSource({"x": [], "y": [], "alpha": [], "token": []})
        self.fig_tokens.scatter("x", "y", source=self.tokens, size=9, alpha="alpha",
                                fill_color={"field": "token", "transform": self.colors},
                                line_color="black", level="overlay")
        n = 2
        # red for similar tokens (+1), blue for opposite ones (−1)
        self.sim_mapper = LinearColorMapper(palette=RdBu11, low=-1.0, high=1.0)
        self.fig_similarity = figure(
            title="Similarities ⟨xᵢ, xⱼ⟩ (ordered by cluster)", width=320,
            height=320, x_range=Range1d(-0.5, n - 0.5), y_range=Range1d(n - 0.5, -0.5),
            tools="hover,save,reset", toolbar_location="above",
            tooltips=[("similarity", "@image{0.0000}")])
        self.similarity = ColumnDataSource({"image": [np.zeros((n, n), dtype=np.float32)]})
        self.image = self.fig_similarity.image(
            image="image", x=-0.5, y=-0.5, dw=n, dh=n, color_mapper=self.sim_mapper,
            source=self.similarity, level="overlay")
        self.fig_similarity.add_layout(ColorBar(color_mapper=self.sim_mapper, width=10), "right")
        self.fig_similarity.grid.visible = False
        self.series = ColumnDataSource({"t": [], "energy": [], "energy_max": [], "clusters": []})
        self.fig_energy = figure(
            title="Interaction energy Eᵦ(t) and its maximum N²eᵝ/(2β)", width=380, height=300,
            x_axis_label="t", tools="pan,wheel_zoom,box_zoom,reset,save",
            toolbar_location="above")
        self.fig_energy.line("t", "energy", source=self.series, line_width=2,
                             legend_label="Eᵦ(t)")
        self.fig_energy.line("t", "energy_max", source=self.series, line_dash="dashed",
                             color="gray", legend_label="N²eᵝ/(2β)")
        legend_below(self.fig_energy, ncols=2, label_width=60)  # (inside, it hid the plateau's end)
        self.fig_clusters = figure(
            title="Clusters: groups with ⟨xᵢ, xⱼ⟩ > 1 − ε", width=380, height=300,
            x_axis_label="t", tools="pan,wheel_zoom,box_zoom,reset,save",
            toolbar_location="above")
        self.fig_clusters.step("t", "clusters", source=self.series, line_width=2,
                               mode="after")
        self.figures = (self.fig_tokens, self.fig_similarity, self.fig_energy,
                        self.fig_clusters)
        self.rescaled_toggle = pn.widgets.Checkbox.from_param(
            self.param.rescaled, name="Rescaled tokens z = e^(−t Wᵥ) x (clustering view)",
            visible=False)
        self.set_model(None)

    # -- a run -----------------------------------------------------------------
    def set_model(self, model: str | None) -> None:
        """Show the plots that apply to ``model`` (none for a model that does not cluster)
        and forget the last run's series."""
        self.mode = None if model is None else clustering_mode(model)
        sphere, shown = self.mode == "on_sphere", self.mode is not None
        for fig in (self.fig_tokens, self.fig_similarity, self.fig_clusters):
            fig.visible = shown
        self.fig_energy.visible = sphere
        self.rescaled_toggle.visible = self.mode == "rescaled"
        self._titles()
        self.clear()

    def _titles(self) -> None:
        frame = self.mode == "rescaled" and self.rescaled
        name = "z" if frame else "x"
        inner = "cos(z_i, z_j)" if frame else (
            "⟨x_i, x_j⟩" if self.mode == "on_sphere" else "cos(x_i, x_j)")
        self.fig_tokens.title.text = (
            "Tokens on the sphere" if self.mode == "on_sphere" else
            f"Directions of the tokens {name}_i (rescaled frame)" if frame else
            "Directions of the tokens x_i")
        self.fig_similarity.title.text = f"Similarities {inner} (ordered by cluster)"
        self.fig_clusters.title.text = f"Clusters: groups with {inner} > 1 − ε"

    @param.depends("rescaled", watch=True)
    def _on_rescaled(self) -> None:
        self._titles()
        self.clear()

    def clear(self) -> None:
        """Forget the series and the projection (a new run)."""
        self.axes = None
        self.series.data = {k: [] for k in self.series.data}
        self.tokens.data = {k: [] for k in self.tokens.data}

    # -- a frame ---------------------------------------------------------------
    def tokens_of(self, frame, sim) -> np.ndarray:
        """The tokens the view draws, as unit vectors (N, d): ``x_i`` on the sphere, else
        the directions of ``z_i = e^{−t W_V} x_i`` (or of ``x_i``)."""
        X = frame.features
        if self.mode == "rescaled" and self.rescaled:
            X = spec(sim.model).readable["rescaled"](sim.problem, X, frame.t)
        return X if self.mode == "on_sphere" else cl.unit_rows(X)

    def update(self, frame, sim) -> None:
        """Show ``frame`` of the run ``sim`` (a :class:`dynamics.Simulation`)."""
        if self.mode is None:
            return
        settings = sim.settings
        U = self.tokens_of(frame, sim)
        N = U.shape[0]
        G = cl.similarity(U)
        count, labels = cl.clusters_of_similarity(G, settings.cluster_eps)
        xy, depth, self.axes = sphere_view(U, self.axes)
        self.colors.high = max(N - 1, 1)
        self.tokens.data = {"x": xy[:, 0], "y": xy[:, 1],
                            "alpha": np.where(depth >= 0, 1.0, FAR_ALPHA),
                            "token": np.arange(N, dtype=np.int32)}
        order = np.argsort(labels, kind="stable")
        G = G[np.ix_(order, order)]
        if self.image.glyph.dw != N:
            self.image.glyph.update(dw=N, dh=N)
            self.fig_similarity.x_range.update(start=-0.5, end=N - 0.5)
            self.fig_similarity.y_range.update(start=N - 0.5, end=-0.5)
        self.similarity.data = {"image": [G.astype(np.float32)]}
        beta = float(sim.problem.beta)
        energy = energy_max = np.nan  # (not drawn: the energy plot is hidden)
        if self.mode == "on_sphere":
            energy = frame.diagnostics["hamiltonian"]  # Eᵦ (the model's energy)
            energy_max = cl.max_interaction_energy(N, beta)
        self.series.stream({"t": np.array([frame.t]), "clusters": np.array([count]),
                            "energy": np.array([energy]),
                            "energy_max": np.array([energy_max])}, rollover=ROLLOVER)

    def __panel__(self):
        return pn.Column(self.rescaled_toggle,
                         pn.FlexBox(*(pn.pane.Bokeh(f) for f in self.figures)))
