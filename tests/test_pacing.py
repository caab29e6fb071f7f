"""The adaptive per-session frame cap (``app/serving/pacing.py``): its control law, on its own
and in a closed loop against a model of a server, and its lag probe on a real loop."""

from __future__ import annotations

import asyncio
import math
import time

import pytest

from app.dashboard import Dashboard
from app.serving import pacing
from app.serving.arguments import server_defaults
from app.serving.pacing import (
    BUSY_TARGET,
    DECREASE,
    INCREASE,
    LAG_HIGH,
    LAG_LOW,
    LAG_WINDOW,
    MIN_FPS,
    FrameGovernor,
    LoopMonitor,
)


def test_high_lag_shrinks_the_scale_geometrically_and_the_cap_stops_at_the_floor():
    gov = FrameGovernor()
    for k in range(1, 6):  # (a constant lag: its median is itself)
        gov.observe_lag(2 * LAG_HIGH)
        assert gov.scale == pytest.approx(DECREASE**k)
    assert gov.cap(40.0, 0.0) == pytest.approx(40.0 * DECREASE**5)
    for _ in range(200):
        gov.observe_lag(1.0)
    assert gov.adapting
    assert gov.cap(40.0, 0.0) == MIN_FPS  # never below the floor
    assert gov.cap(3.0, 0.0) == 3.0  # a session asking fewer than the floor keeps its own


def test_one_late_probe_in_the_window_throttles_nobody_but_a_majority_does():
    gov = FrameGovernor()
    for lag in (0.0, 0.0, 1.0, 0.0, 0.0):  # one pause (a collection, a descheduled core)
        gov.observe_lag(lag)
    assert gov.scale == 1.0
    gov = FrameGovernor()
    assert LAG_WINDOW == 5
    medians = []
    for lag in (0.0, 0.0, 1.0, 1.0, 1.0):  # late most of the time
        gov.observe_lag(lag)
        medians.append(gov.lag)
    assert medians == [0.0, 0.0, 0.0, 0.5, 1.0]
    assert gov.scale == pytest.approx(DECREASE**2)  # the last two medians above LAG_HIGH
    assert gov.lag == 1.0


def test_low_lag_recovers_additively_and_the_band_between_holds_the_scale():
    gov = FrameGovernor(scale=0.1)
    gov.observe_lag((LAG_LOW + LAG_HIGH) / 2)
    assert gov.scale == 0.1  # inside the band: no change (no oscillation at the edge)
    steps = math.ceil((1.0 - 0.1) / INCREASE)
    for k in range(1, steps):
        gov.observe_lag(0.0)
        assert gov.scale == pytest.approx(0.1 + k * INCREASE)
    gov.observe_lag(0.0)
    gov.observe_lag(0.0)
    assert gov.scale == 1.0 and not gov.adapting
    assert gov.cap(40.0, 0.001) == 40.0


def test_fair_share_divides_the_busy_target_by_sessions_and_tick_cost():
    gov = FrameGovernor()
    gov.observe_lag(0.0, sessions=4)
    cheap, dear = gov.cap(1000.0, 0.002), gov.cap(1000.0, 0.010)
    # unclamped: sessions · tick · fps is the busy target
    assert 4 * 0.002 * cheap == pytest.approx(BUSY_TARGET)
    assert 4 * 0.010 * dear == pytest.approx(BUSY_TARGET)
    assert cheap / dear == pytest.approx(5.0)  # the same time each, not the same frames
    gov.observe_lag(0.0, sessions=30)
    assert gov.cap(40.0, 0.010) == MIN_FPS  # 0.6 / (30 · 10 ms) = 2 frames/s → the floor
    gov.observe_lag(0.0, sessions=0)
    assert gov.sessions == 1  # no division by zero


@pytest.mark.parametrize("lag", [-0.01, float("nan")])
def test_a_bad_lag_is_refused(lag):
    with pytest.raises(ValueError, match="lag"):
        FrameGovernor().observe_lag(lag)


def test_a_bad_max_fps_is_refused():
    with pytest.raises(ValueError, match="max_fps"):
        FrameGovernor().cap(0.0, 0.01)


def _settle(sessions, tick, overhead=0.004, max_fps=40.0, probes=600):
    """A model of one server process: each frame costs its tick plus ``overhead`` of
    loop time outside the tick; the lag grows with the loop's overload (the loop is
    late by the work it cannot do in a probe interval). Returns the settled cap and
    the loop's busy fraction."""
    gov = FrameGovernor()
    busy = 0.0
    for _ in range(probes):
        fps = gov.cap(max_fps, tick)
        busy = sessions * fps * (tick + overhead)
        lag = max(busy - 0.9, 0.0) * pacing.PROBE_EVERY * 10 + 0.005 * busy
        gov.observe_lag(lag, sessions)
    return gov.cap(max_fps, tick), busy


def test_closed_loop_each_session_slows_as_sessions_join_and_the_loop_keeps_up():
    settled = [_settle(n, tick=0.008) for n in (1, 2, 5, 10, 15)]
    caps = [cap for cap, _ in settled]
    assert caps[0] == 40.0  # one session alone: its full rate
    assert all(a >= b for a, b in zip(caps, caps[1:], strict=False)), caps
    assert caps[-1] < caps[1] / 3, caps  # lowered as the load grew
    for cap, busy in settled:
        assert cap >= MIN_FPS
        assert busy <= 1.0, settled  # not falling behind: the loop's work fits in its time


def test_closed_loop_overload_beyond_the_floor_is_visible_not_hidden():
    # 40 sessions of 10 ms each at the floor need 40 · 5 · 14 ms = 2.8 s per second:
    # the cap stays at the floor (every session keeps moving) and the busy fraction
    # says the process is over capacity (the README: more processes or fewer sessions).
    cap, busy = _settle(40, tick=0.010)
    assert cap == MIN_FPS and busy > 1.0


def test_loop_monitor_sees_a_blocked_loop_and_stops_when_nobody_plays():
    gov = FrameGovernor()
    playing = [3]
    monitor = LoopMonitor(gov, lambda: playing[0])

    async def main():
        monitor.ensure_running()
        monitor.ensure_running()  # idempotent: one probe chain
        await asyncio.sleep(3 * pacing.PROBE_EVERY)
        assert gov.scale == 1.0 and gov.lag < LAG_HIGH
        for _ in range(LAG_WINDOW):  # ticks that block the loop for 250 ms, again and again
            time.sleep(0.25)
            await asyncio.sleep(0)
        await asyncio.sleep(0.5 * pacing.PROBE_EVERY)
        assert gov.lag > LAG_HIGH and gov.scale < 1.0 and gov.sessions == 3
        playing[0] = 0
        await asyncio.sleep(3 * pacing.PROBE_EVERY)
        assert not monitor.running and gov.scale == 1.0  # stopped and reset

    asyncio.run(main())


def test_without_a_server_the_dashboard_cap_is_its_max_fps():
    dash = Dashboard(max_fps=17.0)
    assert dash.frame_cap() == 17.0


@pytest.mark.parametrize("cap", [40.0, 30.0, 25.0, 20.0, 12.5, 12.0, 7.0, 5.0, 1.0])
def test_callback_period_is_half_the_frame_interval_in_whole_5_ms(cap):
    period = pacing.callback_period(cap)
    interval = 1000.0 / cap
    assert period % 5 == 0 and 10 <= period <= pacing.LONGEST_PERIOD
    if 20 <= interval / 2 <= pacing.LONGEST_PERIOD:
        assert interval / 2 - 5 < period <= interval / 2
    # the frame gate (one interval less half a period of slack) is passed at the second
    # call after a frame, not the third
    assert 2 * period >= interval - period / 2 or period == pacing.LONGEST_PERIOD


def test_callback_period_values_its_bounds_its_tolerance_and_bad_caps():
    assert [pacing.callback_period(c) for c in (40.0, 25.0, 12.0, MIN_FPS, 1.0)] == [
        10, 20, 40, 100, 100]
    assert pacing.callback_period(40.0, shortest=30) == 30  # the session's own period
    assert pacing.callback_period(MIN_FPS, shortest=30) == 100
    # kept while the ideal is near it and it still fits half an interval ...
    assert pacing.callback_period(5.5, current=100) == 90  # 100 > 90.9: no longer fits
    assert pacing.callback_period(6.0, current=80) == 80  # ideal 80
    assert pacing.callback_period(5.5, current=80) == 80  # ideal 90, within 25 %
    assert pacing.callback_period(12.0, current=80) == 40  # far: changed
    for bad in (0.0, -1.0, math.nan):
        with pytest.raises(ValueError, match="frame cap"):
            pacing.callback_period(bad)


class _Callback:
    """Stands for a server session's periodic callback (its period and state)."""

    def __init__(self, period):
        self.period, self.running = period, True


def test_a_session_on_a_busy_server_lengthens_its_callback_period_and_recovers():
    from app.dashboard import Dashboard

    dash = Dashboard(playing=True)
    dash.periodic_callback, dash.flow_control = _Callback(dash.period), True  # a page attached
    gov = pacing.governor()
    try:
        gov.scale = 0.0  # the loop runs late: every cap at the floor
        dash.tick()
        assert dash.frame_cap() == MIN_FPS and dash.periodic_callback.period == 100
        gov.scale = 1.0  # the load went away
        dash.tick_ms = 0.0
        dash.tick()
        assert dash.periodic_callback.period == pacing.callback_period(dash.max_fps) == 10
    finally:
        gov.scale = 1.0


def test_late_calls_do_not_lower_a_capped_sessions_frame_rate(monkeypatch):
    """At the 5 frames/s floor (period 100 ms) on a loop whose calls come 40 ms late
    (its lag), a frame counts from when it was due, not from the late call: 5 frames/s,
    not the 3.6 of every second call (one frame per 280 ms)."""
    from app.dashboard import Dashboard
    from app.serving import playback

    dash = Dashboard(playing=True)
    dash.periodic_callback, dash.flow_control = _Callback(dash.period), True
    clock = [1000.0]
    frames = []  # the frames sent (none is left unacknowledged: the page keeps up)
    dash.advance_frame = lambda: frames.append(clock[0])
    gov = pacing.governor()
    monkeypatch.setattr(playback.time, "perf_counter", lambda: clock[0])
    try:
        gov.scale = 0.0
        dash.tick()  # the period follows the floor's cap: 100 ms
        assert dash.periodic_callback.period == 100
        sent = len(frames)
        for _ in range(100):  # 14 s of calls, each 40 ms late
            clock[0] += 0.140
            dash.tick()
        fps = (len(frames) - sent) / (100 * 0.140)
        assert MIN_FPS * 0.95 <= fps <= MIN_FPS * 1.05, fps
    finally:
        gov.scale = 1.0


def test_a_servers_arguments_are_read_and_bad_ones_are_refused():
    """``panel serve app/main.py --args --max-fps N --steps-per-frame N``: each within its
    parameter's bounds, each at most once, nothing else."""
    assert server_defaults([]) == {}
    assert server_defaults(["--max-fps", "12"]) == {"max_fps": 12.0}
    assert server_defaults(["--steps-per-frame", "10", "--max-fps", "6"]) == {
        "steps_per_frame": 10, "max_fps": 6.0}
    assert isinstance(server_defaults(["--steps-per-frame", "10"])["steps_per_frame"], int)
    lo, hi = Dashboard.param.max_fps.bounds
    assert server_defaults(["--max-fps", str(hi)]) == {"max_fps": hi}
    for bad in (["--max-fps", "0"], ["--max-fps", str(hi + 1)], ["--max-fps", "nan"],
                ["--max-fps", "fast"]):
        with pytest.raises(ValueError, match="--max-fps must be a number"):
            server_defaults(bad)
    top = Dashboard.param.steps_per_frame.bounds[1]
    for bad in (["--steps-per-frame", "0"], ["--steps-per-frame", str(top + 1)],
                ["--steps-per-frame", "2.5"]):
        with pytest.raises(ValueError, match="--steps-per-frame must be a whole number"):
            server_defaults(bad)
    for bad in (["--max-fps"], ["--fps", "12"], ["--max-fps", "12", "--max-fps", "13"],
                ["--steps-per-frame", "5", "--steps-per-frame", "5"]):
        with pytest.raises(ValueError, match="app/main.py takes"):
            server_defaults(bad)


def test_a_page_may_ask_for_its_own_frame_cap_in_its_url():
    dash = Dashboard(query={"max_fps": "8"}, playing=False)
    assert dash.max_fps == 8.0 and dash.frame_cap() == 8.0 and "max_fps" in dash.query
    refused = Dashboard(query={"max_fps": "500"}, playing=False)
    assert refused.max_fps == Dashboard.param.max_fps.default
    assert "max_fps" in refused.notice and "at most 120" in refused.notice


def test_the_test_servers_arguments_are_ones_the_app_reads():
    """``scripts/serving.py`` passes the session defaults as ``app/main.py`` reads them."""
    from serving import _app_arguments

    assert _app_arguments(None, None) == ()
    args = _app_arguments(6, 10)
    assert args[0] == "--args"
    assert server_defaults(list(args[1:])) == {"max_fps": 6.0, "steps_per_frame": 10}
    assert server_defaults(list(_app_arguments(12.5, None)[1:])) == {"max_fps": 12.5}
