"""Adaptive sweeps: the points of a metric map chosen where the metric changes fastest, by
the ``adaptive`` library (python-adaptive: ``Learner1D`` on one setting, ``Learner2D`` on
two), each run exactly as a grid sweep's point (in this process or on the Dask cluster).

**The first round is a uniform cover** (:func:`cover_points`): about a quarter of the
points (:data:`COVER`) on a uniform grid in the learner's coordinates, the range's ends
(the corners) included — ``k × k`` points on two settings with ``k = ⌊√(N/4)⌋`` (at least
3 where ``N ≥ 9``: the ends and the middle), ``⌊N/4⌋`` (at least 3) on one. The learner
is told them as its first batch, then refines. Without it the learner spends its first
rounds on the corners and a coarse cover it builds one triangle at a time, and on a
smooth map a uniform grid of as many points was the better map (by 2 % at 64 points,
``tests/benchmarks/README.md``); with it the adaptive map is the better one at 64, 121 and
256 points on both benchmark maps. A larger cover leaves too few points to refine (half
the points: only level with the grid at 256 on the smooth map, and an error 1.4 times a
quarter's on the sharp one).

The learner is then asked for a *round* of ``round_size`` points at a time, each round
chosen afresh from every value told so far (``Learner2D.stack_size = 1``: no candidate
points kept from an earlier round); they run through
the grid sweep's machinery (:class:`~dynamics.sweeps.run.SweepRun`: here, or in tasks on
a cluster); their values are told back in the order asked, then the next round is asked.
The points chosen therefore depend only on the settings, the ranges, the number of points
and ``round_size`` — not on where the points ran, nor on the order they finished (the
library's own runners, which tell each result as it arrives, are not reproducible).

**The loss** (:data:`LOSSES`, ``loss="default"``): on two settings ``adaptive``'s
``default_loss`` — per triangle, the deviation of the metric from its linear
interpolation (estimated from the gradients at its corners) times the triangle's size,
plus a share of its area. A triangle is refined where the metric bends or jumps (a
ridge, a boundary between regimes: the deviation does not shrink with the triangle
there), while the area term keeps every region sampled, so a flat region is never left
as one huge triangle. On one setting ``adaptive``'s ``default_loss`` of ``Learner1D``:
each interval's length in the plane of (setting, metric), both rescaled to [0, 1],
largest where the metric changes fastest. ``"surface"``: ``adaptive``'s
``minimize_triangle_surface_loss`` (each triangle's area in (settings, metric) space, the
two-setting twin of the one-setting loss; on the sharp map of
``tests/benchmarks/README.md`` it did worse than ``default``, without the cover: RMS 0.50 against
0.30 at 121 points); ``"uniform"`` samples evenly (for comparison).
The learner works in each range's own coordinate: ``log10`` of the setting on a ``log``
range, the setting itself on a ``lin`` one.

**What the learner is told** (:func:`learning_value`): the first metric (``learn``). A
metric is NaN or infinite for some points (a run that diverged, a blow-up that never
came, a failed run); the learner needs a finite number. A time that never came is told
as its horizon (``diverged_at``: ``t_end``; ``blowup_time`` and
``first_order_blowup_time``: the lab's ``T_LIMIT``, 40); any other NaN or infinite value
is told as the largest finite value told so far (0 before any), so a run that blew up
sits at the top of the map and the boundary around it is refined. The dataset keeps the
metric itself (NaN where it is).
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Mapping, Sequence

import numpy as np
import param

from ..settings import Settings
from .cache import sweep_key
from .cluster import ClusterStarter, running_client
from .dataset import point_dataset
from .run import SweepRun
from .schedule import cluster_pays, prospect

#: The losses an adaptive sweep can use (the module's docstring says why ``default``).
LOSSES = ("default", "surface", "uniform")

#: Points per round: the learner is asked for this many at a time, they run together
#: (one task per few points on a cluster), then are told back.
ROUND_SIZE = 8

#: Share of an adaptive sweep's points in its first round, a uniform cover of the ranges
#: (:func:`cover_points`; the module's docstring says why).
COVER = 0.25

#: Time metrics whose NaN means "not before the horizon" (told as the horizon).
HORIZON_METRICS = ("diverged_at", "blowup_time", "first_order_blowup_time")


def parse_range(text: str) -> tuple[str, tuple[float, float, bool]]:
    """One axis of an adaptive sweep from its command-line form: ``name=lo:hi``,
    ``name=lo:hi:log`` or ``name=lo:hi:lin`` (a count, ``lo:hi:log:n`` or ``lo:hi:n``, is
    accepted and ignored: the learner chooses the points).

    Returns
    -------
    name, (lo, hi, log)

    Raises
    ------
    ValueError
        Malformed text, a list of values, an unknown or non-numeric setting.
    """
    name, sep, spec = text.partition("=")
    name = name.strip().replace("-", "_")
    parts = [p.strip() for p in spec.split(":")]
    if not sep or not name or len(parts) not in (2, 3, 4):
        raise ValueError(f"an adaptive axis reads name=lo:hi[:log|lin], got {text!r}")
    scale = "lin"
    if len(parts) == 4 or (len(parts) == 3 and not parts[2].isdigit()):
        scale = parts[2]
    if scale not in ("log", "lin"):
        raise ValueError(f"adaptive axis {text!r}: spacing must be log or lin, got {scale!r}")
    try:
        lo, hi = float(parts[0]), float(parts[1])
    except ValueError:
        raise ValueError(f"adaptive axis {text!r}: lo and hi must be numbers") from None
    return name, (lo, hi, scale == "log")


def check_ranges(ranges: Mapping) -> dict[str, tuple[float, float, bool]]:
    """The ranges ``{setting: (lo, hi[, "log"|"lin"|bool])}`` (or ``"lo:hi:log"`` texts) of
    an adaptive sweep as ``{setting: (lo, hi, log)}``; ``ValueError`` for one or more than
    two settings, a setting that is not a real number, ``lo >= hi``, or a log range that
    is not positive (the bounds of each setting are checked by :class:`SweepRun`)."""
    if not isinstance(ranges, Mapping) or not 1 <= len(ranges) <= 2:
        raise ValueError("an adaptive sweep takes one or two ranges {setting: (lo, hi, "
                         f"'log'|'lin')}}, got {ranges!r}")
    out = {}
    for name, spec in ranges.items():
        if isinstance(spec, str):
            spec = parse_range(f"{name}={spec}")[1]
        spec = tuple(spec)
        if len(spec) not in (2, 3):
            raise ValueError(f"range of {name}: (lo, hi) or (lo, hi, 'log'|'lin'), got {spec!r}")
        log = spec[2] if len(spec) == 3 else False
        if isinstance(log, str):
            if log not in ("log", "lin"):
                raise ValueError(f"range of {name}: spacing must be log or lin, got {log!r}")
            log = log == "log"
        p = Settings.param[name] if name in Settings.names() else None
        if not isinstance(p, param.Number) or isinstance(p, param.Integer):
            raise ValueError(f"an adaptive sweep varies real-valued settings; {name!r} is not "
                             "one (sweep it on a grid)")
        lo, hi = float(spec[0]), float(spec[1])
        if not lo < hi:
            raise ValueError(f"range of {name}: lo must be below hi, got {lo} and {hi}")
        if log and lo <= 0:
            raise ValueError(f"range of {name}: a log range needs lo > 0, got {lo}")
        out[name] = (lo, hi, bool(log))
    return out


def cover_points(bounds: Sequence[tuple[float, float]], points: int,
                 share: float = COVER) -> list[tuple[float, ...]]:
    """The first round of an adaptive sweep of ``points`` points over ``bounds`` (one or
    two ``(lo, hi)`` in the learner's coordinates): a uniform grid, the ends included, of
    about ``share`` of the points — ``k`` values a side with ``k = ⌊√(share·points)⌋`` on
    two settings, ``⌊share·points⌋`` on one, at least 3 (the ends and the middle) and at
    most what ``points`` allows (``⌊√points⌋``, ``points``).

    Returns
    -------
    list of tuple
        The points in row-major order of the axes (the first setting slowest).
    """
    dims = len(bounds)
    most = math.isqrt(points) if dims == 2 else points
    k = math.isqrt(int(share * points)) if dims == 2 else int(share * points)
    k = min(max(k, 3), most)
    axes = [np.linspace(lo, hi, k) for lo, hi in bounds]
    for axis, (lo, hi) in zip(axes, bounds, strict=True):
        axis[0], axis[-1] = lo, hi
    return [tuple(float(v) for v in p) for p in itertools.product(*axes)]


def learning_value(name: str, result: Mapping, t_end: float, fallback: float) -> float:
    """The number the learner is told for the metric ``name`` of a point's ``result``
    (the module's docstring): the metric where finite; a time that never came, its
    horizon; anything else NaN or infinite, ``fallback`` (the largest told so far)."""
    value = float(result.get(name, math.nan))
    if math.isfinite(value):
        return value
    if math.isnan(value) and result.get("status") in ("completed", "diverged", "failed") \
            and name in HORIZON_METRICS:
        if name == "diverged_at":
            return float(t_end)
        from ..inertial.experiments import T_LIMIT

        return float(T_LIMIT)
    return float(fallback)


class AdaptiveRun(SweepRun):
    """An adaptive sweep (the module's docstring), watched and cancelled as a
    :class:`SweepRun`.

    Parameters
    ----------
    settings : Settings or mapping, optional
        The base settings.
    ranges : mapping
        One or two ``{setting: (lo, hi, "log"|"lin")}`` (:func:`check_ranges`).
    points : int
        Points in all (at least 2 on one setting, 4 on two: the range's ends).
    t_end, metrics, client
        As for :class:`SweepRun`; the learner learns the first metric (``learn``).
    round_size : int
        Points asked of the learner at a time (:data:`ROUND_SIZE`); part of what fixes
        the result.
    loss : str
        One of :data:`LOSSES`.
    learn : str, optional
        The metric the learner refines (default: the first of ``metrics``).
    **options
        ``every``, ``batch_size``, ``workers``, ``processes``, ``on_batch``, ``cache``,
        ``where``, as for :class:`SweepRun`.

    Attributes
    ----------
    samples : list of dict
        The swept settings' values of each point asked so far (point ``k`` has index
        ``(k,)`` in :attr:`results` and in ``on_batch``'s results).
    learner
        The ``adaptive`` learner of the last :meth:`run` (in the learner's coordinates).
    """

    def __init__(self, settings: Settings | Mapping | None = None,
                 ranges: Mapping | None = None, points: int = 64, t_end: float = 10.0,
                 metrics: Sequence[str] | None = None, client=None, *,
                 round_size: int = ROUND_SIZE, loss: str = "default",
                 learn: str | None = None, **options):
        ranges = check_ranges(ranges if ranges is not None else {})
        smallest = 2 if len(ranges) == 1 else 4
        if int(points) != points or points < smallest:
            raise ValueError(f"points must be an integer of at least {smallest} (the range's "
                             f"ends), got {points!r}")
        if int(round_size) != round_size or round_size < 1:
            raise ValueError(f"round_size must be a positive integer, got {round_size!r}")
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {', '.join(LOSSES)}, got {loss!r}")
        # the grid of the ranges' ends: SweepRun checks them against the settings' bounds
        super().__init__(settings, {n: [lo, hi] for n, (lo, hi, _) in ranges.items()},
                         t_end, metrics, client, **options)
        self.ranges = ranges
        if learn is None:
            learn = self.metrics[0]
        if learn not in self.metrics:
            raise ValueError(f"learn must be one of the metrics {self.metrics}, got {learn!r}")
        self.learn, self.loss, self.round_size = learn, loss, int(round_size)
        self.points, self.total = [], int(points)
        self.samples: list[dict] = []
        self.learner = None

    @property
    def key(self) -> str:
        """The cache key (the ranges, points, round size, loss and learned metric in it)."""
        grid = {n: [lo, hi, "log" if log else "lin"] for n, (lo, hi, log) in self.ranges.items()}
        grid["adaptive"] = [self.total, self.round_size, self.loss, self.learn, "cover",
                            COVER]
        return sweep_key(self.base, grid, self.t_end, self.metrics, self.every)

    def point_settings(self, index: tuple[int, ...]) -> Settings:
        """The settings of point ``index`` (``(k,)``)."""
        return Settings(**{**self.base, **self.samples[index[0]]})

    # -- the learner ------------------------------------------------------------------
    def new_learner(self):
        """A fresh ``adaptive`` learner over the ranges (in their coordinates)."""
        import adaptive
        from adaptive.learner import learner1D, learner2D

        bounds = [(self._to_learner(lo, log), self._to_learner(hi, log))
                  for lo, hi, log in self.ranges.values()]
        if len(bounds) == 1:
            loss = {"default": learner1D.default_loss, "surface": learner1D.default_loss,
                    "uniform": learner1D.uniform_loss}[self.loss]
            return adaptive.Learner1D(None, bounds=bounds[0], loss_per_interval=loss)
        loss = {"default": learner2D.default_loss, "uniform": learner2D.uniform_loss,
                "surface": learner2D.minimize_triangle_surface_loss}[self.loss]
        learner = adaptive.Learner2D(None, bounds=bounds, loss_per_triangle=loss)
        learner.stack_size = 1  # each ask chosen afresh from all values told
        return learner

    @staticmethod
    def _to_learner(value: float, log: bool) -> float:
        return math.log10(value) if log else float(value)

    def _from_learner(self, u) -> dict:
        """The settings' values of the learner's point ``u`` (within each range)."""
        us = (u,) if np.ndim(u) == 0 else tuple(u)
        values = {}
        for (name, (lo, hi, log)), x in zip(self.ranges.items(), us, strict=True):
            ends = {self._to_learner(lo, log): lo, self._to_learner(hi, log): hi}
            v = ends.get(float(x), 10.0 ** float(x) if log else float(x))
            values[name] = float(min(max(v, lo), hi))
        return values

    # -- running ----------------------------------------------------------------------
    def _execute(self) -> None:
        learner = self.learner = self.new_learner()
        self.samples, self._asked, self._top = [], [], 0.0
        if self.client is None and self.where != "local":
            self.client = running_client()
        starter = client = None
        try:
            if self.where == "cluster":
                starter = ClusterStarter(self.client, self.workers, self.processes)
                client = starter.client()
            while len(self.samples) < self.total and not self.cancelled:
                asked = self._ask(learner)
                if client is None and starter is not None and starter.ready.is_set():
                    try:
                        client = starter.client()
                    except Exception:  # auto: a cluster that does not start: stay here
                        starter.close()
                        starter = None
                if client is not None:
                    self._run_on(client, asked)
                else:
                    self._run_round_here(asked)
                    if self.where == "auto" and starter is None and self.cost is None:
                        starter = self._cluster_if_it_pays(len(asked))
                self._tell(learner, asked)
        finally:
            if starter is not None:
                starter.close()

    def _ask(self, learner) -> list:
        """The next round's points, as ``((k,), values)``; recorded in :attr:`samples`.
        The first round is the uniform cover (:func:`cover_points`), told to the learner
        as pending."""
        if not self.samples:
            one = len(self.ranges) == 1
            cover = cover_points([learner.bounds] if one else learner.bounds, self.total)
            us = [u[0] for u in cover] if one else cover
            for u in us:
                learner.tell_pending(u)
        else:
            n = min(self.round_size, self.total - len(self.samples))
            us, _ = learner.ask(n)
        out = []
        for u in us:
            k = len(self.samples)
            self.samples.append(self._from_learner(u))
            self._asked.append(u)
            out.append(((k,), {**self.base, **self.samples[k]}))
        return out

    def _run_round_here(self, asked: list) -> None:
        import time

        t0 = time.perf_counter()
        self._run_here(deque(asked), len(asked))
        if self.cost is None:
            self.cost = (time.perf_counter() - t0) / max(len(asked), 1)

    def _cluster_if_it_pays(self, done: int):
        """``auto`` after the first round (its time the cost per point): a cluster
        starter when the schedule model says the rest ends sooner there, else None."""
        threads, startup = prospect(self.client, self.workers)
        if cluster_pays(self.total - done, self.cost, threads, startup):
            return ClusterStarter(self.client, self.workers, self.processes)
        return None

    def _tell(self, learner, asked: list) -> None:
        """Tell the learner the round's values, in the order asked (points without a
        result, cancelled, are not told)."""
        for (k,), _ in asked:
            result = self.results.get((k,))
            if result is None:
                continue
            value = learning_value(self.learn, result, self.t_end, self._top)
            self._top = max(self._top, value)
            learner.tell(self._asked[k], value)

    def dataset(self):
        """The points so far as an ``xarray.Dataset`` along ``point`` (points asked but
        not run: ``cancelled``)."""
        attrs = {"sampler": "adaptive", "learned": self.learn, "loss": self.loss, "cover": COVER,
                 "round_size": self.round_size,
                 "ranges": "; ".join(f"{n}={lo}:{hi}:{'log' if log else 'lin'}"
                                     for n, (lo, hi, log) in self.ranges.items())}
        return point_dataset(list(self.ranges), self.base, self.metrics, self.samples,
                             self.results, self.t_end, self.every, attrs)

    def _load_cached(self, ds) -> None:
        """A cache hit: its points become :attr:`samples`."""
        self.samples = [{n: float(ds[n].values[k]) for n in self.ranges}
                        for k in range(ds.sizes["point"])]
        self.points = [((k,), s) for k, s in enumerate(self.samples)]

