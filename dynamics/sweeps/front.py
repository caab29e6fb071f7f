"""The front doors of sweeps: :func:`sweep` (a grid, or adaptive with ``adaptive=N``) and
:func:`adaptive_sweep`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..settings import Settings
from .adaptive import AdaptiveRun
from .run import SweepRun


def sweep(settings: Settings | Mapping | None = None, grid: Mapping | None = None,
          t_end: float = 10.0, metrics: Sequence[str] | None = None, client=None, *,
          adaptive: int | None = None, **options):
    """Run ``settings`` at every point of ``grid`` and keep a few metrics of each run.

    With ``adaptive=N``: an adaptive sweep of ``N`` points instead, ``grid`` giving one or
    two ranges ``{setting: (lo, hi, "log"|"lin")}`` (:func:`adaptive_sweep`).

    Parameters
    ----------
    settings : Settings or mapping, optional
        The base settings; the grid's values replace theirs.
    grid : mapping of str to sequence
        ``{"beta": [...], "gamma": [...]}``: one dimension per setting. Every value is
        checked against its setting's bounds before anything runs.
    t_end : float
        Final time of every run.
    metrics : sequence of str, optional
        Names from :data:`METRICS` (default: those of the model's part).
    client : distributed.Client, optional
        Run on an existing cluster; by default on an embedded ``LocalCluster`` sized to
        the machine when a cluster pays (``where``), whose worker processes are spawned:
        a script calling ``sweep`` without a client needs the
        ``if __name__ == "__main__":`` guard, as any script using ``multiprocessing``.
    adaptive : int, optional
        Points of an adaptive sweep (:class:`~dynamics.sweeps.adaptive.AdaptiveRun`).
    **options
        ``every``, ``batch_size``, ``workers``, ``processes``, ``on_batch``, ``cache``,
        ``where`` (``"auto"``, ``"local"``, ``"cluster"``: :class:`SweepRun`); with
        ``adaptive`` also ``round_size``, ``loss``, ``learn``.

    Returns
    -------
    xarray.Dataset
        One variable per metric and ``status``, ``message``; dimensions the swept
        settings in grid order; attributes the base settings (``setting_<name>``),
        ``t_end`` and ``every``. Each point equals a plain
        ``simulate(settings.copy(**point), t_end, every)`` reduced by
        :func:`~dynamics.sweeps.metrics.trajectory_metrics` (and
        :func:`~dynamics.sweeps.metrics.lab_metrics`), bit for bit.

    Raises
    ------
    ValueError
        A grid value out of bounds, an unknown setting or metric.

    Examples
    --------
    >>> ds = sweep(Settings(model="attention", path="oscillation"),   # doctest: +SKIP
    ...            grid={"beta": [0.5, 1, 2], "gamma": [0.1, 1, 10]}, t_end=5,
    ...            metrics=["kl_mean", "lag_amplitude"])
    """
    if adaptive is not None:
        return adaptive_sweep(settings, grid, adaptive, t_end, metrics, client, **options)
    return SweepRun(settings, grid, t_end, metrics, client, **options).run()


def adaptive_sweep(settings: Settings | Mapping | None = None, ranges: Mapping | None = None,
                   points: int = 64, t_end: float = 10.0, metrics: Sequence[str] | None = None,
                   client=None, **options):
    """An adaptive sweep of ``points`` points over one or two ``ranges``
    (:class:`AdaptiveRun`; ``sweep(settings, ranges, adaptive=points)`` is the same).

    Returns
    -------
    xarray.Dataset
        One dimension ``point``; the swept settings and the metrics as variables along it
        (and ``status``, ``message``); attributes the base settings (``setting_<name>``),
        ``t_end``, ``every``, ``ranges``, ``learned``, ``loss``, ``round_size``. Each point
        equals a plain ``simulate`` of its settings reduced by
        :func:`~dynamics.sweeps.metrics.trajectory_metrics`, bit for bit.

    Examples
    --------
    >>> ds = adaptive_sweep(Settings(model="attention", path="oscillation"),  # doctest: +SKIP
    ...                     {"beta": (0.3, 3, "log"), "gamma": (0.1, 10, "log")}, 64,
    ...                     t_end=5, metrics=["lag_amplitude"])
    """
    return AdaptiveRun(settings, ranges, points, t_end, metrics, client, **options).run()
