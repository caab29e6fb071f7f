"""Plain helpers shared by several test modules: ``from helpers import ...``.

(``tests`` is on pytest's ``pythonpath``, see pyproject.toml.) Fixtures, the
Hypothesis profile and the session hooks live in ``conftest.py``.
"""

import dataclasses
import functools

import numpy as np
from hypothesis import Phase, settings


def assert_same_states(a, b) -> None:
    """Trajectories ``a`` and ``b`` recorded the same times and states, bit for bit."""
    assert np.array_equal(a.times, b.times)
    assert np.array_equal(a.features, b.features)
    assert np.array_equal(a.momenta, b.momenta)
    assert (a.attention is None) == (b.attention is None)
    if a.attention is not None:
        assert np.array_equal(a.attention, b.attention)


def assert_same_runs(a, b) -> None:
    """Trajectories ``a`` and ``b`` are the same run, bit for bit: times, states, every
    diagnostic (NaN where NaN) and how they ended."""
    assert_same_states(a, b)
    assert a.diagnostics.keys() == b.diagnostics.keys()
    for k in a.diagnostics:
        assert np.array_equal(a.diagnostics[k], b.diagnostics[k], equal_nan=True), k
    assert (a.status, a.message, a.diverged_at) == (b.status, b.message, b.diverged_at)


def fitted_order(steps, errors):
    """Slope of log(error) against log(step)."""
    return float(np.polyfit(np.log(steps), np.log(errors), 1)[0])


def random_sym(rng, d, lo=-1.0, hi=1.0):
    """Symmetric d×d matrix: eigenvalues uniform in [lo, hi], random orthonormal basis."""
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return (q * rng.uniform(lo, hi, d)) @ q.T


def random_spd(rng, d, lo=0.3, hi=1.5):
    """Symmetric positive definite d×d matrix (``random_sym`` with 0 < lo ≤ hi)."""
    return random_sym(rng, d, lo, hi)


def few_examples(max_examples):
    """Hypothesis settings for costly examples: ``max_examples`` of them, no deadline,
    no shrinking (the rest as in the profile loaded by conftest.py)."""
    return settings(max_examples=max_examples, deadline=None,
                    phases=[Phase.explicit, Phase.reuse, Phase.generate])


def open_group(page, title: str) -> None:
    """Open the sidebar's group ``title`` (a collapsed card) in the Playwright ``page``,
    if it is not open yet: its header is clicked only when none of its items (its own
    stylesheets aside) is displayed, and the test waits until one is."""
    header = page.locator(".card-header", has_text=title).first
    header.wait_for(timeout=30000)
    shown = ("h => [...h.parentNode.children].some(c => !['STYLE', 'LINK'].includes(c.tagName)"
             " && !c.classList.contains('card-header') && getComputedStyle(c).display !== 'none')")
    if header.evaluate(shown):
        return
    header.click()
    for _ in range(300):
        if header.evaluate(shown):
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"the group {title!r} did not open")


def read_only(obj, _seen=None):
    """``obj`` with every NumPy array inside it (through dataclass fields, dicts, lists
    and tuples) made read-only, so that a test that wrote into a shared result would fail
    loudly rather than change what the next test reads."""
    seen = set() if _seen is None else _seen
    if id(obj) in seen:
        return obj
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        obj.flags.writeable = False
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for field in dataclasses.fields(obj):
            read_only(getattr(obj, field.name), seen)
    elif isinstance(obj, dict):
        for value in obj.values():
            read_only(value, seen)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            read_only(value, seen)
    return obj


@functools.cache
def lab_preset_run(name: str):
    """The run of the Inertial lab's shipped preset ``name``: ``run_lab_experiment`` of its
    settings (``run_momentum_experiment`` for the momentum base case), made once per test
    process and read-only. The tests that only read a preset's run (the tour's claims, the
    slides, the whole-run laws) share it rather than each running every preset again."""
    from app.lab.inertial_lab import load_presets
    from dynamics.inertial.experiments import run_lab_experiment
    from dynamics.inertial.momentum import run_momentum_experiment

    (preset,) = [p for p in load_presets()[0] if p["name"] == name]
    values = preset["settings"]
    run = (run_momentum_experiment if values.get("model") == "momentum_quadratic"
           else run_lab_experiment)
    return read_only(run(values))
