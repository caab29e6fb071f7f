"""Many runs at once: ``simulate_batch(list_of_settings, t_end, every)``.

Small runs (N up to a few dozen) spend their time in Python, once per step and per run.
Here the runs of a batch (different β, γ, m, k, seeds, initial states ...) are stacked
along a leading axis and stepped together: one NumPy call per operation for the whole
batch. The results are **bit-identical** to :func:`~dynamics.trajectory.simulate` of
each run alone: every operation is the one the model's stepper performs, applied to
each run's slice, and the operations are chosen so that a slice is computed exactly as
the unstacked array is (``np.matmul`` on stacks calls the same BLAS product per matrix;
row reductions over the last, contiguous axis; a sum over a whole matrix as
``np.vecdot`` of its flattened rows, BLAS's dot as ``np.vdot`` calls it; per-run scalars
as arrays of the floats a single run computes). ``tests/test_batch.py`` checks it with
``np.array_equal`` on every recorded array and diagnostic, at several batch sizes.

Which runs are stepped together: the canonical model
(:class:`~dynamics.steppers.tracked_verlet.TrackedEtdVerlet`) without logit noise, on
seeded weights: those on its plain branch, ``λ dt ≤ STIFF_LAMBDA_H`` (0.05), in one batch
(:class:`~dynamics.batch_canonical.CanonicalBatch`), the stiff ones in another
(:class:`~dynamics.batch_stiff.StiffBatch`: its tracking steps on the stacks, equal to a
run's to rounding, ``tests/test_batch_stiff.py``; a step that does not track is the run's
own, graded sub-steps included). Every other run of the list — other models, stochastic
logits, real heads — is run by ``simulate`` one by one (the same results, without the
speed-up). A batch shares ``t_end`` and ``every``; its runs
must share ``n_tokens``, ``dim`` and ``dt`` (a ``ValueError`` names what differs). A step
that raises a floating point error for some run is taken again one run at a time by the
engine (which stops the runs that diverge, with their usual message), and the batch
continues with the others.
"""

from __future__ import annotations

import numpy as np

from .batch_canonical import CanonicalBatch
from .batch_stiff import StiffBatch
from .diagnostics import wanted
from .settings import Settings
from .steppers.exact_logit import STIFF_LAMBDA_H
from .trajectory import Trajectory, simulate

#: Models whose runs are stepped together (the others run one by one).
BATCHED_MODELS = ("canonical",)


def simulate_batch(settings_list, t_end: float = 10.0, every: int = 1,
                   diagnostics=True) -> list[Trajectory]:
    """Run every settings of ``settings_list`` from ``t = 0`` to ``t_end`` together.

    Parameters
    ----------
    settings_list : sequence of Settings or dict
        The runs (a dict is ``Settings(**dict)``). They must share ``n_tokens``, ``dim``
        and ``dt``.
    t_end, every, diagnostics
        As for :func:`~dynamics.trajectory.simulate` (``diagnostics=("kl",)``: ``t`` and
        ``kl`` only, the others not computed).

    Returns
    -------
    list of Trajectory
        One per run, in order, equal (``np.array_equal``) to
        ``simulate(s, t_end, every, diagnostics=diagnostics)``.
    """
    names = wanted(diagnostics)
    runs = [s if isinstance(s, Settings) else Settings(**s) for s in settings_list]
    if not runs:
        return []
    if not (np.isfinite(t_end) and t_end > 0):
        raise ValueError(f"t_end must be a positive finite number, got {t_end!r}")
    if int(every) != every or every < 1:
        raise ValueError(f"every must be a positive integer, got {every!r}")
    for name in ("n_tokens", "dim", "dt"):
        found = sorted({getattr(s, name) for s in runs})
        if len(found) > 1:
            raise ValueError(f"a batch must share {name}; found {found} (group the runs "
                             f"by {name} and call simulate_batch once per group)")
    together = [i for i, s in enumerate(runs) if batchable(s)]
    out: list[Trajectory | None] = [None] * len(runs)
    for i, s in enumerate(runs):
        if i not in together:
            out[i] = simulate(s, t_end, every, diagnostics=diagnostics)
    for engine in (CanonicalBatch, StiffBatch):
        rows = [i for i in together if (engine is StiffBatch) == stiff(runs[i])]
        if not rows:
            continue
        batch = engine([runs[i] for i in rows])
        for i, traj in zip(rows, batch.run(t_end, int(every), names), strict=True):
            out[i] = traj
            if names == {"t"}:  # as simulate's
                traj.diagnostics = {"t": traj.times}
    return out


def batchable(s: Settings) -> bool:
    """Whether a run is stepped together with others by :func:`simulate_batch` (the
    others run alone, through :func:`~dynamics.trajectory.simulate`). Real heads
    (``weights`` not ``"seed"``) run alone: their constant feature column is pinned,
    which the batch's steps do not do."""
    return s.model in BATCHED_MODELS and s.weights == "seed" and s.logit_noise == 0.0


def stiff(s: Settings) -> bool:
    """Whether a run of the canonical model steps on its stiff branch
    (``λ dt > STIFF_LAMBDA_H``, ``λ = γ/β``): :class:`~dynamics.batch_stiff.StiffBatch`
    steps it with the other stiff runs of a batch."""
    return s.gamma / s.beta * s.dt > STIFF_LAMBDA_H


__all__ = ["BATCHED_MODELS", "CanonicalBatch", "StiffBatch", "batchable", "simulate_batch",
           "stiff"]
