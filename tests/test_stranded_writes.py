"""Changes Panel queued for a page and left unsent are sent (``app.serving.server``).

Panel 1.9.4 can strand a page's queued changes (its sending task clears the queue's flag
while a newer batch waits): a run's last frame and its end then never reached the page.
``resend_stranded_writes`` is given a queue, its flags and a sender in that state and
must hand exactly the stranded pages to the sender, flagged as the sender expects.
"""

from __future__ import annotations

import asyncio

from app.serving import server


def test_a_page_with_queued_changes_and_no_flag_is_sent_again():
    queued = {"stranded": ["PATCH-DOC"], "sending": ["PATCH-DOC"]}
    flagged = {"sending": True}  # a sending task will take these
    sent = []
    assert server.resend_stranded_writes(queued, flagged, sent.append) == 1
    assert sent == ["stranded"]
    # flagged as Panel's sender expects (it returns at once on a page without the flag)
    assert flagged == {"sending": True, "stranded": True}
    # nothing stranded now: a second look sends nothing
    assert server.resend_stranded_writes(queued, flagged, sent.append) == 0
    assert sent == ["stranded"]


def test_panels_own_queue_is_looked_at_by_default():
    assert server.resend_stranded_writes() == 0  # (nothing queued in this process)


def test_the_watch_runs_while_sessions_are_registered(monkeypatch):
    looks = []
    monkeypatch.setattr(server, "resend_stranded_writes", lambda: looks.append(1) or 0)
    monkeypatch.setattr(server, "STRANDED_CHECK_EVERY", 0.01)

    class Session:
        periodic_callback = None

    async def main():
        one = Session()
        server.register_session(one)  # starts the watch on this loop
        assert server.watching_stranded_writes()
        await asyncio.sleep(0.2)
        assert len(looks) >= 3
        server.forget_session(one)
        await asyncio.sleep(0.05)
        stopped = len(looks)
        await asyncio.sleep(0.1)
        return stopped

    stopped = asyncio.run(main())
    assert len(looks) == stopped  # no session: the watch stopped
    assert not server.watching_stranded_writes()
