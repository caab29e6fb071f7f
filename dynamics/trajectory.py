"""One entry point to simulate, and one result type (STYLE.md point 3).

With ``rtol`` (:func:`simulate_adaptive`) the run is stepped by the stepper whose steps an
error estimate controls: DOP853 (:mod:`dynamics.solvers.explicit`), the exponential method
(:mod:`dynamics.solvers.exprk`) or the model's own step composed or doubled
(:mod:`dynamics.solvers.adaptive`).
"""

from __future__ import annotations

import io
import math
import os
import tempfile
from dataclasses import dataclass, field

import numpy as np

from . import models
from .diagnostics import wanted
from .frame import Frame
from .settings import Settings
from .simulation import Simulation
from .solvers.adaptive import AdaptiveStepper
from .solvers.explicit import ExplicitStepper, explicit_states, explicit_suits
from .solvers.exprk import ExponentialStepper, exponential_suits


@dataclass
class Trajectory:
    """Recorded frames of one run.

    Attributes
    ----------
    settings : dict
        The setting values of the run.
    times : ndarray, shape (T,)
    features, momenta : ndarray, shape (T, N, d)
    attention : ndarray, shape (T, N, N) or None
        ``None`` for models without an attention matrix.
    diagnostics : dict of str to ndarray, shape (T,)
        Every scalar diagnostic, ``t`` first.
    status, message : str
        Final status of the run (``"running"`` means it reached ``t_end``).
    diverged_at : float or None
    """

    settings: dict
    times: np.ndarray
    features: np.ndarray
    momenta: np.ndarray
    attention: np.ndarray | None
    diagnostics: dict = field(default_factory=dict)
    status: str = "running"
    message: str = ""
    diverged_at: float | None = None

    @classmethod
    def from_frames(cls, settings: Settings, frames: list[Frame], sim: Simulation):
        names = list(frames[0].diagnostics)
        has_attention = frames[0].attention is not None
        return cls(
            settings=settings.values(),
            times=np.array([f.t for f in frames]),
            features=np.stack([f.features for f in frames]),
            momenta=np.stack([f.momenta for f in frames]),
            attention=np.stack([f.attention for f in frames]) if has_attention else None,
            diagnostics={k: np.array([f.diagnostics[k] for f in frames]) for k in names},
            status=sim.status, message=sim.message, diverged_at=sim.diverged_at,
        )

    def to_dataframe(self):
        """The diagnostics as a ``pandas.DataFrame``, one row per frame."""
        import pandas as pd

        return pd.DataFrame(self.diagnostics)

    def to_csv(self, path=None) -> str | None:
        """Write the diagnostics as CSV to ``path`` (atomically), or return the text."""
        text = self.to_dataframe().to_csv(index=False, float_format="%.17g", lineterminator="\n")
        if path is None:
            return text
        write_atomically(path, text.encode())
        return None

    def to_xarray(self):
        """A labelled ``xarray.Dataset`` of states and diagnostics."""
        import xarray as xr

        data = {k: ("time", v) for k, v in self.diagnostics.items() if k != "t"}
        data["features"] = (("time", "token", "feature"), self.features)
        data["momenta"] = (("time", "token", "feature"), self.momenta)
        if self.attention is not None:
            data["attention"] = (("time", "token", "source"), self.attention)
        attrs = {f"setting_{k}": (v if not isinstance(v, bool) else int(v))
                 for k, v in self.settings.items()}
        attrs.update(status=self.status, message=self.message)
        return xr.Dataset(data, coords={"time": self.times}, attrs=attrs)

    def to_netcdf(self, path=None) -> bytes | None:
        """Write a NetCDF file to ``path`` (atomically), or return its bytes."""
        blob = self.to_xarray().to_netcdf(engine="scipy")
        if path is None:
            return bytes(blob)
        write_atomically(path, bytes(blob))
        return None

    def to_html(self, path, **options):
        """Write the run as one page that opens from disk, offline, and plays: A(t) beside
        A*(t), the KL lag with its tracking bound, the energy balance and the tokens,
        with a time slider (the app's exporter, found through the entry point
        :data:`EXPORTERS` ``html``; ``options``: ``title``, ``caption``).

        Returns
        -------
        pathlib.Path
            The file written (atomically).

        Raises
        ------
        LookupError
            No exporter is installed (the ``app`` package of attention-dynamics).
        ValueError
            A run whose page cannot be drawn (your own arrays, a mid-run change, ``rtol``).
        """
        return exporter("html")(self, path, **options)

    def summary(self) -> dict:
        """``status``, ``t_final``, ``diverged_at``, ``message``, frames and final diagnostics."""
        final = {k: _json_float(v[-1]) for k, v in self.diagnostics.items()}
        return {
            "model": self.settings.get("model"),
            "status": "diverged" if self.diverged_at is not None else "completed",
            "t_final": float(self.times[-1]),
            "diverged_at": self.diverged_at,
            "message": self.message,
            "n_frames": int(len(self.times)),
            "final": final,
        }


#: Entry-point group of the writers of a trajectory in other formats: the app registers
#: ``html`` (its page to take home) there, so this package never imports the app.
EXPORTERS = "attention_dynamics.exporters"


def exporter(name: str):
    """The writer registered as ``name`` in the entry-point group :data:`EXPORTERS`.

    Raises
    ------
    LookupError
        None is installed under that name.
    """
    from importlib.metadata import entry_points

    found = list(entry_points(group=EXPORTERS, name=name))
    if not found:
        raise LookupError(f"no {name!r} exporter is installed (entry point group "
                          f"{EXPORTERS!r}): install the app with pip install -e . "
                          "(attention-dynamics), which registers it")
    return found[0].load()


def _json_float(x):
    x = float(x)
    return x if np.isfinite(x) else None


def write_atomically(path, payload: bytes) -> None:
    """Write ``payload`` to ``path`` through a temporary file: no partial file on error."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".partial-")
    try:
        with io.FileIO(fd, "w") as fh:
            fh.write(payload)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def simulate(settings: Settings | None = None, t_end: float = 10.0, every: int = 1,
             rtol: float | None = None, atol: float | None = None, *,
             arrays: dict | None = None, diagnostics=True, **values) -> Trajectory:
    """Run ``settings`` from ``t = 0`` to ``t_end``, recording every ``every`` steps.

    Parameters
    ----------
    settings : Settings, optional
        Defaults to ``Settings(**values)``.
    t_end : float
        Final time (> 0); the run takes ``round(t_end / dt)`` steps.
    every : int
        Record a frame every ``every`` steps (the first and last are always kept).
    rtol, atol : float, optional
        With ``rtol``, step sizes follow an error estimate instead of ``dt`` (which is
        only the first step tried): each step's local error stays within
        ``atol + rtol·|y|`` (``atol`` defaults to ``rtol/100``), measured as
        ``solve_ivp`` measures its own: DOP853 on the whole system for a canonical run
        whose relaxation is not stiff (:mod:`dynamics.solvers.explicit`), an exponential
        Runge–Kutta method of stiff order 4 for a stiff one (:mod:`dynamics.solvers.exprk`;
        its ``∫D`` comes from the energy balance, so ``energy_residual`` checks nothing
        there), else a fourth-order composition of the model's step where that step is
        symmetric (:mod:`dynamics.solvers.adaptive`). Frames come every
        ``every`` steps, at uneven times; the trajectory's ``steps`` attribute counts the
        steps kept and rejected and names the ``method``.
    arrays : dict, optional
        Your own arrays, passed to :class:`Simulation` (``features``, ``momenta``,
        ``attention``, ``score_matrix``, ``value_matrix``, ``kernel``, ``value``).
    diagnostics : bool or collection of str
        True: every diagnostic of the model. A collection of names, e.g. ``("kl",)``:
        ``t`` and those of them the model reports, the others not computed (each value
        bit-identical to the full run's; :func:`~dynamics.diagnostics.part_one`). False:
        the states only (``times``, ``features``, ``momenta``, ``attention``; the
        ``diagnostics`` hold ``t`` alone), equal to the full run's; with ``rtol`` on a
        non-stiff canonical run the states are then stepped without the engine (a third
        to a half of a short run).

    Returns
    -------
    Trajectory
        Stops early, with ``status == "diverged"`` and ``diverged_at``, if the run
        diverges; the last recorded frame is then the last finite state.
    """
    settings = settings if settings is not None else Settings(**values)
    names = wanted(diagnostics)
    if not (np.isfinite(t_end) and t_end > 0):
        raise ValueError(f"t_end must be a positive finite number, got {t_end!r}")
    if int(every) != every or every < 1:
        raise ValueError(f"every must be a positive integer, got {every!r}")
    if rtol is not None:
        if arrays:
            raise ValueError("rtol with your own arrays is not supported; give dt instead")
        return simulate_adaptive(settings, t_end, every, rtol, atol, diagnostics=diagnostics)
    sim = Simulation(settings, **(arrays or {}))
    n_steps = max(1, int(round(t_end / settings.dt)))
    frames = [sim.frame(names, arrays=False)]
    done = 0
    while done < n_steps and sim.status == "running":
        chunk = min(int(every), n_steps - done)
        sim.advance(chunk)
        done += chunk
        frames.append(sim.frame(names, arrays=False))
    traj = Trajectory.from_frames(settings, frames, sim)
    if names == {"t"}:
        traj.diagnostics = {"t": traj.times}
    return traj


def simulate_adaptive(settings, t_end: float, every: int, rtol: float, atol: float | None,
                      diagnostics=True):
    """:func:`simulate` with ``rtol`` (see :mod:`dynamics.solvers.adaptive`):
    a frame every ``every`` kept steps, the first at ``t = 0`` and the last at ``t_end``.
    ``diagnostics``: as for :func:`simulate`; False: the states only (the non-stiff
    canonical branch then skips the diagnostics' work,
    :func:`~dynamics.solvers.explicit.explicit_states`)."""
    rtol = _tolerance("rtol", rtol)
    atol = 1e-2 * rtol if atol is None else _tolerance("atol", atol)
    names = wanted(diagnostics)
    if names == {"t"}:
        traj = _states_only(settings, t_end, every, rtol, atol)
        if traj is not None:
            return traj
    sim = Simulation(settings)
    if sim.logit_noise > 0.0:
        raise ValueError("rtol needs a deterministic run: logit_noise must be 0 with rtol "
                         f"(got {sim.logit_noise:g}); use dt")
    if explicit_suits(sim.problem) is None:  # non-stiff canonical
        stepper = ExplicitStepper(sim.problem, rtol=rtol, atol=atol, t_end=t_end,
                                  norm_limit=settings.norm_limit)
    elif exponential_suits(sim.problem) is None:  # stiff canonical
        stepper = ExponentialStepper(sim.problem, rtol=rtol, atol=atol, t_end=t_end,
                                     norm_limit=settings.norm_limit)
    else:
        stepper = AdaptiveStepper(sim.problem, type(sim.stepper), rtol=rtol, atol=atol,
                                  t_end=t_end, h0=min(settings.dt, t_end))
    sim.use_stepper(stepper, dt=t_end)  # the largest step: the controller decides
    frames = [sim.frame(names, arrays=False)]
    while sim.t < t_end and sim.status == "running":
        stepper.hold = True
        for _ in range(int(every)):
            sim.advance(1)
            if sim.t >= t_end or sim.status != "running":
                break
        stepper.hold = False
        sim.advance(0)  # the deferred diagnostics of the state reported
        frames.append(sim.frame(names, arrays=False))
    traj = Trajectory.from_frames(settings, frames, sim)
    if names == {"t"}:
        traj.diagnostics = {"t": traj.times}
    if isinstance(stepper, ExplicitStepper):  # DOP853 or the exponential method
        traj.steps = {"accepted": stepper.accepted, "rejected": stepper.rejected,
                      "method": stepper.method, "nfev": stepper.nfev}
    else:
        doubled = stepper.accepted - stepper.composed
        traj.steps = {"accepted": stepper.accepted, "rejected": stepper.rejected,
                      "method": " and ".join(name for name, n in (
                          ("composition", stepper.composed), ("step doubling", doubled))
                          if n) or "none"}
    return traj


def _states_only(settings, t_end, every, rtol, atol):
    """The states of a non-stiff canonical run without the engine (its problem and initial
    state built as :class:`~dynamics.Simulation` builds them), or None for any other run
    or one that stops early (the full run then says where and why)."""
    values = settings.values()
    spec = models.get(values["model"])
    if spec.name != "canonical" or values["logit_noise"] > 0.0:
        return None
    problem, state = spec.build(values, {})
    if explicit_suits(problem) is not None:
        return None
    states = explicit_states(problem, state, t_end, every, rtol, atol, values["norm_limit"])
    if states is None:
        return None
    times, X, P, A, steps = states
    traj = Trajectory(settings=values, times=np.array(times), features=np.stack(X),
                      momenta=np.stack(P), attention=np.stack(A),
                      diagnostics={"t": np.array(times)})
    traj.steps = steps
    return traj


def _tolerance(name, value) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not (math.isfinite(value) and 1e-14 <= value <= 1.0):
        raise ValueError(f"{name} must be in [1e-14, 1], got {value!r}")
    return value
