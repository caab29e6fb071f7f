"""Browser frame rate of the served dashboard (``scripts/bench_browser.py``), marker ``ui``.

With ``--benchmark-enable`` a ~10 s run at N = 64, d = 16 stores its figures (frames/s
in the page, slider latency, server CPU and RSS, simulation-only rate and the ratio) in
``benchmark.extra_info``; by default (``--benchmark-disable``) a 3-second smoke run only
checks that the page keeps updating.  No timing is ever asserted: the machine is shared.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import bench_browser as bench
import pytest
from serving import CHROMIUM

from .conftest import record

pytestmark = pytest.mark.ui


def _in_thread(fn):
    """Run ``fn`` in a fresh thread: Playwright's sync API refuses a thread whose asyncio
    loop is running, as it is once pytest-playwright's fixtures were used in the session."""
    def call(**kwargs):
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(fn, **kwargs).result()
    return call


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"Chromium not found at {CHROMIUM}")
def test_browser_frame_rate(benchmark):
    if benchmark.disabled:  # smoke run (the fixture, disabled, just calls the function)
        result = benchmark.pedantic(
            _in_thread(bench.measure), kwargs={"seconds": 3.0, "n_tokens": 64, "dim": 16,
                                   "slider_changes": 0, "warmup": 1.0, "log": lambda *_: None},
            rounds=1, iterations=1)
        assert result["fps"] > 0, result
    else:
        result = benchmark.pedantic(
            _in_thread(bench.measure), kwargs={"seconds": 10.0, "n_tokens": 64, "dim": 16,
                                   "slider_changes": 10, "log": lambda *_: None},
            rounds=1, iterations=1)
        assert result["fps"] > 0, result
        record(benchmark, "browser frame rate (N = 64, d = 16)", {
            k: v for k, v in result.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)})
    assert result["page_errors"] == [], result["page_errors"]
    assert result["server_tracebacks"] == 0
