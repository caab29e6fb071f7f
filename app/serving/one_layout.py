"""One layout of the page per message from the server (:class:`OneLayoutPerMessage`).

In the page, BokehJS lays the whole page out again, at once, for every change of a
panel's or a plot's visibility, size or text that a message from the server carries:
a tour step (two dozen such changes in one message) took the page 8–12 s of a core
before the step showed, almost all of it spent laying out the same page again and
again (``compute_layout``, measuring every plot's style). The component below makes
the page do it once per message, after all of the message's changes: the page looks
the same as before, only sooner. The server sends a step's changes as one message
(``pn.io.hold``).
"""

from __future__ import annotations

from panel.custom import JSComponent


class OneLayoutPerMessage(JSComponent):
    """Installed once in a page (any number of instances): while BokehJS applies a
    message of changes from the server (``Document.apply_json_patch``), the top of the
    page's layout is only marked as to be laid out again; it is laid out once, when the
    whole message has been applied. A change that comes from the page itself (a click,
    a resized window) is laid out at once, as before. Draws nothing."""

    _esm = """
    function install() {
      const { LayoutDOMView } = Bokeh.require("models/layouts/layout_dom");
      const { Document } = Bokeh.require("document/document");
      const layout = LayoutDOMView.prototype.invalidate_layout;
      const apply = Document.prototype.apply_json_patch;
      let applying = 0;
      const roots = new Set();
      // the top of a layout (its parent is no layout) lays the page out: deferred while
      // a message is applied; a child's call goes up to it as before
      LayoutDOMView.prototype.invalidate_layout = function () {
        if (applying > 0 && !(this.parent instanceof LayoutDOMView)) {
          roots.add(this);
          return;
        }
        return layout.call(this);
      };
      Document.prototype.apply_json_patch = function (...args) {
        applying += 1;
        try {
          return apply.apply(this, args);
        } finally {
          applying -= 1;
          if (applying === 0 && roots.size) {
            const pending = [...roots];
            roots.clear();
            for (const view of pending) {
              // each root laid out whatever another one does (and a message's own error,
              // if it had one, is the one raised)
              try {
                if (!view.is_destroyed) layout.call(view);
              } catch (err) {
                console.error("laying out the page after a message:", err);
              }
            }
          }
        }
      };
    }
    export function render({ model }) {
      if (!window.__oneLayoutPerMessage) {
        window.__oneLayoutPerMessage = true;
        try {
          install();
        } catch (err) {  // (a BokehJS without these modules: the page lays out as before)
          console.warn("one layout per message not installed:", err);
        }
      }
      return document.createElement("span");
    }
    """
