"""The guided tour's two page components (:mod:`app.teaching.tour`): the arrow keys ← →
as counters (:class:`ArrowKeys`), and a scroller that brings a step's plot into view
(:class:`ScrollTo`)."""

from __future__ import annotations

import param
from panel.custom import JSComponent


class ArrowKeys(JSComponent):
    """The arrow keys ← → of the page as two counters, unless a widget has them: a key
    pressed in a text field, on a slider's handle, in a select or list, or one a widget
    has already used (``defaultPrevented``) moves that widget, not the tour."""

    forward = param.Integer(default=0)
    back = param.Integer(default=0)

    _esm = """
    const FIELDS = ["INPUT", "TEXTAREA", "SELECT"];
    const ROLES = ["slider", "spinbutton", "textbox", "searchbox", "combobox", "listbox",
                   "option", "radio", "radiogroup", "tab", "tablist", "menu", "menuitem",
                   "grid", "tree", "treeitem"];
    // the key belongs to a widget: an element on the event's path (through shadow roots)
    // that edits or chooses with the arrow keys
    function widgetKey(e) {
      if (e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey) return true;
      for (const el of e.composedPath()) {
        if (!(el instanceof Element)) continue;
        if (FIELDS.includes(el.tagName) || el.isContentEditable) return true;
        const role = el.getAttribute("role");
        if (role && ROLES.includes(role)) return true;
        if (el.classList.contains("noUi-handle") || el.classList.contains("noUi-target"))
          return true;
      }
      return false;
    }
    export function render({ model }) {
      const onKey = (e) => {
        if (e.key !== "ArrowRight" && e.key !== "ArrowLeft") return;
        if (widgetKey(e)) return;
        if (e.key === "ArrowRight") { model.forward += 1; } else { model.back += 1; }
      };
      document.addEventListener("keydown", onKey);
      model.on("remove", () => document.removeEventListener("keydown", onKey));
      return document.createElement("span");
    }
    """


class ScrollTo(JSComponent):
    """Scrolls the plot whose Bokeh model id is ``target`` into view each time ``count``
    grows (and when first drawn): the least scrolling that shows the whole plot below the
    tour's banner (which stays at the window's top), its top first. The plot
    of a step that has just opened may not be drawn yet, or move as the page settles: it
    is looked for until it is drawn, and put back into view once the page has settled,
    unless someone else scrolled the page meanwhile."""

    target = param.String(default="")
    count = param.Integer(default=0)

    _esm = """
    export function render({ model }) {
      let timers = [];
      const view = (id) => {
        for (const v of Bokeh.index.query(v => v.model.id === id)) {
          if (v.el && v.el.isConnected && v.el.getBoundingClientRect().height > 0) return v;
        }
        return null;
      };
      // the tour's banner stays at the window's top (sticky): a plot under it is hidden
      const covered = () => {
        for (const v of Bokeh.index.query(v => (v.model.css_classes || []).includes("tour"))) {
          if (v.el && v.el.isConnected) return Math.max(0, v.el.getBoundingClientRect().bottom);
        }
        return 0;
      };
      const inView = (el) => {
        const r = el.getBoundingClientRect();
        return r.top >= covered() && r.bottom <= window.innerHeight;
      };
      // the least scrolling that shows the plot below the banner (its top first, if the
      // plot is taller than the room left)
      const reveal = (el) => {
        const r = el.getBoundingClientRect(), top = covered() + 4;
        const dy = r.top < top ? r.top - top
                 : Math.min(r.bottom - window.innerHeight + 4, r.top - top);
        window.scrollBy(0, dy);
      };
      const go = () => {
        timers.forEach(clearTimeout);
        timers = [];
        const id = model.target;
        if (!id) return;
        const started = Date.now();
        let scrolled = 0, mine = null;
        const attempt = () => {
          // someone scrolled the page since (the lecturer, a reader of the plots): it
          // stays where they put it
          if (mine !== null && Math.abs(window.scrollY - mine) > 1) return;
          const v = view(id);
          if (v != null && !inView(v.el)) {
            reveal(v.el);
            scrolled += 1;
          }
          if (v != null) mine = window.scrollY;
          // looked for 10 s at most; checked again while the page settles (3 s)
          if ((v == null && Date.now() - started < 10000) ||
              (v != null && scrolled < 3 && Date.now() - started < 3000)) {
            timers.push(setTimeout(attempt, 250));
          }
        };
        attempt();
      };
      model.on("count", go);
      model.on("remove", () => timers.forEach(clearTimeout));
      go();
      return document.createElement("span");
    }
    """
