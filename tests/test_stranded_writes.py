"""Changes Panel queued for a page and left unsent are sent (``app.serving.server``).

Panel 1.9.4 can strand a page's queued changes (its sending task clears the queue's flag
while a newer batch waits): a run's last frame and its end then never reached the page.
These tests set up that state in Panel's own queue and check that
``resend_stranded_writes`` hands exactly the stranded pages to Panel's sender.
"""

from __future__ import annotations

import asyncio

import pytest
from bokeh.document import Document
from panel.io import document as panel_document

from app.serving import server


@pytest.fixture
def sent(monkeypatch):
    """Panel's sender replaced by a recorder: the pages handed to it, in order."""
    calls = []
    monkeypatch.setattr(panel_document, "_dispatch_write_task",
                        lambda doc, func, *args: calls.append((doc, func, args)))
    yield calls
    for doc in list(panel_document._WRITE_MSGS.keys()):
        panel_document._WRITE_MSGS.pop(doc, None)
        panel_document._WRITE_BLOCK.pop(doc, None)


def test_a_page_with_queued_changes_and_no_flag_is_sent_again(sent):
    stranded, sending, idle = Document(), Document(), Document()
    panel_document._WRITE_MSGS[stranded] = {"connection": ["PATCH-DOC"]}
    panel_document._WRITE_MSGS[sending] = {"connection": ["PATCH-DOC"]}
    panel_document._WRITE_BLOCK[sending] = True  # a sending task will take these
    assert server.resend_stranded_writes() == 1
    assert sent == [(stranded, panel_document._dispatch_msgs, (stranded,))]
    # flagged as Panel's sender expects (it returns at once on a page without the flag)
    assert panel_document._WRITE_BLOCK.get(stranded) is True
    assert idle not in panel_document._WRITE_BLOCK
    # nothing stranded now: a second look sends nothing
    assert server.resend_stranded_writes() == 0 and len(sent) == 1


def test_panels_sender_sends_the_stranded_batch_once_flagged():
    """The real sender: without the flag it leaves the batch (the defect), with it it
    takes the batch from the queue."""
    doc = Document()
    panel_document._WRITE_MSGS[doc] = {}
    try:
        asyncio.run(panel_document._dispatch_msgs(doc))
        assert doc in panel_document._WRITE_MSGS  # left queued: stranded
        panel_document._WRITE_BLOCK[doc] = True
        asyncio.run(panel_document._dispatch_msgs(doc))
        assert doc not in panel_document._WRITE_MSGS
        assert doc not in panel_document._WRITE_BLOCK
    finally:
        panel_document._WRITE_MSGS.pop(doc, None)
        panel_document._WRITE_BLOCK.pop(doc, None)


def test_the_watch_runs_while_sessions_are_registered(monkeypatch):
    looks = []
    monkeypatch.setattr(server, "resend_stranded_writes", lambda: looks.append(1) or 0)
    monkeypatch.setattr(server, "STRANDED_CHECK_EVERY", 0.01)
    monkeypatch.setattr(server, "_stranded_loop", None)

    class Session:
        periodic_callback = None

    async def main():
        one = Session()
        server.register_session(one)  # starts the watch on this loop
        await asyncio.sleep(0.2)
        assert len(looks) >= 3
        server.forget_session(one)
        await asyncio.sleep(0.05)
        stopped = len(looks)
        await asyncio.sleep(0.1)
        return stopped

    stopped = asyncio.run(main())
    assert len(looks) == stopped  # no session: the watch stopped
    assert server._stranded_loop is None
