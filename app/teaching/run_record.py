"""What is kept of a run to compare against, and its file.

A :class:`RunRecord` is a run's settings, its curves and its token paths, thinned to at
most :data:`MAX_FRAMES` frames: what a pinned run (:mod:`app.teaching.pinned`) draws as
a ghost and what a slide (:mod:`app.teaching.slides`) draws. Two runs are told apart by
the settings in which they differ (:func:`comparison_labels`: "β = 1" against "β = 4").

Records are saved to and loaded from one NetCDF file (:func:`to_netcdf`,
:func:`from_netcdf`) that carries each run's settings, so a comparison prepared before
a class opens in it.

File layout (NetCDF 3, written by xarray with SciPy's engine like the run's download,
:mod:`app.mainview.export`): global attributes ``format`` (:data:`FORMAT`), ``version`` and
``runs``; per run ``i`` the attribute ``run{i}_settings`` (the settings as JSON), the
coordinate ``run{i}_time`` and the variables ``run{i}_<curve>`` (one per
:data:`CURVES`, NaN where the model does not define it) and ``run{i}_features``
(time, token, feature). Runs keep their own dimensions: they may differ in N, d and
length.
"""

from __future__ import annotations

import io
import json
import math
import re
from dataclasses import dataclass

import numpy as np

from dynamics import Settings

#: The ``format`` attribute of a pinned-runs file.
FORMAT = "attention-dynamics pinned runs"
#: Version of the file layout.
VERSION = 1
#: The diagnostics a pinned run keeps (what its ghosts and a slide draw).
CURVES = ("kl", "kl_bound", "hamiltonian", "potential", "work", "dissipated",
          "energy_residual", "dissipation_rate", "momentum_energy")
#: Frames a pinned run keeps (evenly spread; the first and last always).
MAX_FRAMES = 400
#: How a setting is named in a settings line (else its label before " (", else its name).
_SHORT = {"init_attention": "A(0)", "init_momentum": "P(0)", "path": "path", "seed": "seed",
          "n_tokens": "N", "dim": "d", "dt": "dt"}


def _short_name(name: str) -> str:
    if name in _SHORT:
        return _SHORT[name]
    label = Settings.param[name].label or name
    return label.split(" (")[0] if " (" in label else name


def _format_value(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def used_settings(values: dict) -> dict:
    """The settings of ``values`` that its model (and path) uses, in the controls' order.

    Parameters
    ----------
    values : dict
        Every setting, ``{name: value}``.

    Returns
    -------
    dict
        :func:`app.settings_io.used_settings` of these values (``model`` first).
    """
    from app.settings_io import used_settings as used

    return used(Settings(**values))


def settings_line(values: dict, names=None) -> str:
    """One line naming the settings, e.g. ``"canonical · β = 1 · γ = 1 · N = 8 · …"``.

    Parameters
    ----------
    values : dict
        Every setting of a run.
    names : iterable of str, optional
        Only these settings (default: those the model uses, :func:`used_settings`).

    Returns
    -------
    str
    """
    used = used_settings(values)
    names = list(used) if names is None else list(names)
    parts = [str(values["model"])] if "model" in names else []
    parts += [f"{_short_name(k)} = {_format_value(values[k])}" for k in names if k != "model"]
    return " · ".join(parts)


def differing(a: dict, b: dict) -> list[str]:
    """The settings in which runs ``a`` and ``b`` differ, among those either uses.

    Returns
    -------
    list of str
        In the controls' order (``model`` first when it differs).
    """
    names = list(dict.fromkeys([*used_settings(a), *used_settings(b)]))
    return [k for k in names if a.get(k) != b.get(k)]


def comparison_labels(pinned: dict, current: dict) -> tuple[str, str]:
    """Legend lines of a pinned run and of the current one: the settings in which they
    differ (``("β = 1", "β = 4")``), or ``"same settings"`` for both."""
    names = differing(pinned, current)
    if not names:
        return "same settings", "same settings"
    return settings_line(pinned, names), settings_line(current, names)


@dataclass(frozen=True, eq=False)
class RunRecord:
    """What a pinned run (or a slide) keeps of one run.

    Attributes
    ----------
    settings : dict
        Every setting of the run, ``{name: value}``.
    times : ndarray, shape (T,)
    curves : dict of str to ndarray, shape (T,)
        The diagnostics of :data:`CURVES` (NaN where the model does not define one).
    features : ndarray, shape (T, N, d)
        The token features at those times.
    """

    settings: dict
    times: np.ndarray
    curves: dict
    features: np.ndarray

    @classmethod
    def from_frames(cls, settings, frames, max_frames: int | None = MAX_FRAMES) -> RunRecord:
        """The record of ``frames`` (a run's :class:`dynamics.Frame` s, in time order).

        Parameters
        ----------
        settings : dynamics.Settings or dict
        frames : sequence of dynamics.Frame
            At least one.
        max_frames : int or None
            Keep at most this many frames, evenly spread, the first and last always
            (None: all).
        """
        frames = list(frames)
        if not frames:
            raise ValueError("no frames to record: the run has not started")
        keep = spread(len(frames), max_frames)
        frames = [frames[i] for i in keep]
        values = settings.values() if isinstance(settings, Settings) else dict(settings)
        return cls(
            settings=values,
            times=np.array([f.t for f in frames], dtype=float),
            curves={k: np.array([f.diagnostics.get(k, math.nan) for f in frames], dtype=float)
                    for k in CURVES},
            features=np.stack([f.features for f in frames]).astype(float),
        )

    @property
    def model(self) -> str:
        return self.settings["model"]

    @property
    def line(self) -> str:
        """The run's settings line (:func:`settings_line`)."""
        return settings_line(self.settings)

    def energy_change(self) -> np.ndarray:
        """``H(t) − H(0)`` (the model's energy of the balance), shape (T,)."""
        h = self.curves["hamiltonian"]
        return h - h[0]


def spread(n: int, most: int | None) -> np.ndarray:
    """Indices of at most ``most`` of ``n`` items, evenly spread, first and last kept."""
    if most is None or n <= most:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, max(most, 2))).astype(int))


# -- the file ------------------------------------------------------------------
def to_dataset(runs):
    """The pinned ``runs`` (sequence of :class:`RunRecord`) as one ``xarray.Dataset``."""
    import xarray as xr

    data, coords = {}, {}
    attrs = {"format": FORMAT, "version": VERSION, "runs": len(runs)}
    for i, run in enumerate(runs):
        p = f"run{i}_"
        coords[p + "time"] = run.times
        for k in CURVES:
            data[p + k] = (p + "time", run.curves[k])
        data[p + "features"] = ((p + "time", p + "token", p + "feature"), run.features)
        attrs[p + "settings"] = json.dumps(run.settings)
    return xr.Dataset(data, coords=coords, attrs=attrs)


def to_netcdf(runs) -> bytes:
    """The bytes of a NetCDF 3 file of the pinned ``runs`` (see the module's layout)."""
    return bytes(to_dataset(runs).to_netcdf(engine="scipy"))


def from_netcdf(payload: bytes) -> list[RunRecord]:
    """The pinned runs of a file written by :func:`to_netcdf`.

    Parameters
    ----------
    payload : bytes
        The file's content.

    Returns
    -------
    list of RunRecord

    Raises
    ------
    ValueError
        The bytes are not a NetCDF file, or not one of pinned runs, or a run's data or
        settings are missing or invalid (the message says which).
    """
    import xarray as xr

    try:
        with xr.open_dataset(io.BytesIO(bytes(payload)), engine="scipy") as ds:
            ds = ds.load()
    except Exception as err:  # the engine's errors vary with the damage
        raise ValueError(f"not a NetCDF file of pinned runs ({type(err).__name__}: {err})") \
            from None
    if ds.attrs.get("format") != FORMAT:
        raise ValueError(f"not a file of pinned runs: its format attribute is "
                         f"{ds.attrs.get('format')!r}, expected {FORMAT!r}")
    try:
        n = int(ds.attrs["runs"])
    except (KeyError, TypeError, ValueError):
        raise ValueError("file of pinned runs without a valid 'runs' attribute") from None
    return [_read_run(ds, i) for i in range(n)]


def _read_run(ds, i: int) -> RunRecord:
    p = f"run{i}_"
    missing = [p + k for k in (*CURVES, "features") if p + k not in ds]
    if p + "settings" not in ds.attrs:
        missing.append(f"attribute {p}settings")
    if missing:
        raise ValueError(f"pinned run {i}: missing {', '.join(missing)}")
    try:
        mapping = json.loads(ds.attrs[p + "settings"])
    except (TypeError, ValueError) as err:
        raise ValueError(f"pinned run {i}: its settings are not JSON ({err})") from None
    values, problems = Settings.check(mapping, require_all=True)
    if problems:
        raise ValueError(f"pinned run {i}: invalid settings:\n- " + "\n- ".join(problems))
    times = np.asarray(ds[p + "time"].values, dtype=float)
    features = np.asarray(ds[p + "features"].values, dtype=float)
    if len(times) == 0 or not np.all(np.isfinite(times)) or features.ndim != 3 \
            or not np.all(np.isfinite(features)):
        raise ValueError(f"pinned run {i}: no frames, or non-finite times or features")
    return RunRecord(settings=Settings(**values).values(), times=times,
                     curves={k: np.asarray(ds[p + k].values, dtype=float) for k in CURVES},
                     features=features)


def safe_filename(text: str) -> str:
    """``text`` reduced to letters, digits, ``.``, ``_`` and ``-`` (a file name part)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "run"
