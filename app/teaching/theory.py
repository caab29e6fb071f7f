"""The Theory page: the theory behind the dashboard, in the app's own words.

The general text is markdown shipped with the app (``assets/theory/part1.md`` and
``part2.md``, with KaTeX math ``$…$`` / ``$$…$$``); after each part come the sections of
its models, generated from the registry (``spec.title``, ``spec.equations``,
``spec.look_for``), each with the anchor ``spec.section``. The page is rendered by
KaTeX with its stylesheet inside the pane (:mod:`app.serving.katex`).

In-app links: any ``<a href="#section">`` on the dashboard's page (the equations panel,
a preset's caption, the Theory page's contents) opens the Theory tab at that section,
through :class:`TheoryLinks`, a small browser component that reports the click to the
server and scrolls to the section when asked.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

import panel as pn
import param
from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin
from panel.custom import JSComponent

from app.serving import katex
from app.serving.resources import read_asset
from dynamics import models

#: The parts of the theory, in page order: (part number, anchor, heading).
PARTS = ((1, "part-1", "Part I — Nonequilibrium attention"),
         (2, "part-2", "Part II — Inertial attention"))
#: The anchor of the page's top (its contents).
TOP = "theory"


def _math(content: str, info: dict) -> str:
    """Math back in KaTeX's delimiters (HTML-escaped; KaTeX reads the text)."""
    if info.get("display_mode"):
        return f"$${html.escape(content)}$$"
    return f"${html.escape(content)}$"


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark").use(dollarmath_plugin, allow_space=True,
                                      allow_digits=True, renderer=_math)

    def heading_open(renderer, tokens, idx, options, env):
        token = tokens[idx]
        text = tokens[idx + 1].content
        token.attrSet("id", slug(text))
        return renderer.renderToken(tokens, idx, options, env)

    md.add_render_rule("heading_open", heading_open)
    return md


def slug(text: str) -> str:
    """The anchor of a heading of the theory text.

    Parameters
    ----------
    text : str
        The heading, e.g. ``"The Fisher–Rao attention flow"``.

    Returns
    -------
    str
        Its words in lower case joined by ``-``: ``"the-fisher-rao-attention-flow"``.
    """
    words = re.findall(r"[0-9a-z]+", text.lower())
    return "-".join(words) or "section"


def render_markdown(text: str) -> str:
    """HTML of the theory's markdown.

    Parameters
    ----------
    text : str
        CommonMark with math in ``$…$`` / ``$$…$$``.

    Returns
    -------
    str
        HTML; the math is kept (HTML-escaped) in its delimiters for KaTeX, and every
        heading gets the anchor :func:`slug` of its text.
    """
    return _markdown().render(text)


def model_section(spec) -> str:
    """The Theory page's section of one model, from its spec.

    Parameters
    ----------
    spec : dynamics.models.ModelSpec

    Returns
    -------
    str
        HTML: a heading with the anchor ``spec.section``, the equations and "look for".
    """
    look = (f"<p><i>Look for:</i> {html.escape(spec.look_for)}</p>" if spec.look_for else "")
    return (f'<section class="model"><h3 id="{html.escape(spec.section)}">'
            f"{html.escape(spec.title)}</h3>\n{spec.equations}\n{look}</section>\n")


def page_html() -> str:
    """The whole Theory page.

    Returns
    -------
    str
        HTML: the contents, then for each part of :data:`PARTS` its text
        (``assets/theory/part<n>.md``) and its models' sections (:func:`model_section`),
        read from the registry at each call (a model registered later has its section).
    """
    contents, body = [], []
    for part, anchor, heading in PARTS:
        specs = models.specs(part=part)
        items = "".join(f'<li><a href="#{html.escape(s.section)}">{html.escape(s.title)}</a></li>'
                        for s in specs)
        contents.append(f'<li><a href="#{anchor}">{html.escape(heading)}</a><ul>{items}</ul></li>')
        body.append(f'<h2 id="{anchor}">{html.escape(heading)}</h2>\n')
        body.append(render_markdown(read_asset("theory", f"part{part}.md")))
        body.append(f'<h2 id="{anchor}-models">The models of {html.escape(heading.split(" — ")[0])}'
                    "</h2>\n")
        body += [model_section(s) for s in specs]
    return (f'<div id="{TOP}"><h1>Theory</h1>'
            f'<p>Contents (the links stay on this page):</p><ul>{"".join(contents)}</ul></div>'
            + "".join(body))


def anchors(page: str) -> tuple:
    """Every anchor of a page.

    Parameters
    ----------
    page : str
        HTML, e.g. :func:`page_html`.

    Returns
    -------
    tuple of str
        The ``id`` attributes in page order, once each: the parts, the headings of the
        theory text and the models' sections (``spec.section``).
    """
    return tuple(dict.fromkeys(re.findall(r'id="([^"]+)"', page)))


class TheoryLinks(JSComponent):
    """The browser half of the in-app links: reports a click on ``<a href="#id">``
    anywhere on the page and scrolls to an anchor of the Theory page when asked.

    Parameters
    ----------
    on_link : callable ``(section: str) -> None``
        Called on the server with the anchor of a clicked link.
    """

    _esm = """
    function find(root, id) {
      const hit = root.getElementById ? root.getElementById(id) : null
      if (hit) return hit
      for (const node of root.querySelectorAll("*")) {
        if (node.shadowRoot) {
          const inner = find(node.shadowRoot, id)
          if (inner) return inner
        }
      }
      return null
    }

    export function render({ model }) {
      const onClick = (event) => {
        const link = event.composedPath().find((n) => n.tagName === "A")
        const href = link ? link.getAttribute("href") || "" : ""
        if (href.length < 2 || !href.startsWith("#")) return
        event.preventDefault()
        model.send_msg({ section: decodeURIComponent(href.slice(1)) })
      }
      document.addEventListener("click", onClick)
      model.on("remove", () => document.removeEventListener("click", onClick))
      model.on("msg:custom", (msg) => {
        let tries = 0
        const attempt = () => {
          const target = find(document, msg.scroll)
          if (target && target.getClientRects().length) {
            target.scrollIntoView({ block: "start" })
          } else if (++tries < 50) {
            setTimeout(attempt, 100)  // the tab is still being laid out
          }
        }
        attempt()
      })
    }
    """

    def __init__(self, on_link: Callable[[str], None], **params):
        params.setdefault("width", 0)
        params.setdefault("height", 0)
        params.setdefault("margin", 0)
        super().__init__(**params)
        self._on_link = on_link

    def _handle_msg(self, data) -> None:
        section = data.get("section") if isinstance(data, dict) else None
        if isinstance(section, str):
            self._on_link(section)

    def scroll_to(self, section: str) -> None:
        """Ask the page to scroll to an anchor (once it is laid out).

        Parameters
        ----------
        section : str
            The ``id`` to scroll to, searched in every shadow root of the page.
        """
        self._send_msg({"scroll": section})


class Theory(pn.viewable.Viewer):
    """The Theory tab: the theory text and one section per registered model."""

    section = param.String(default=TOP, doc="The anchor last asked for (see :meth:`show`).")

    def __init__(self, stylesheets=(), **params):
        super().__init__(**params)
        katex.install_fonts()
        #: The page's HTML (the registry's models at the time the page was built).
        self.html = page_html()
        #: Its anchors (:func:`anchors`).
        self.anchors = anchors(self.html)
        self.pane = pn.pane.LaTeX(self.html, renderer="katex", css_classes=["theory"],
                                  stylesheets=[katex.STYLESHEET, *stylesheets],
                                  sizing_mode="stretch_width", max_width=900)

    def show(self, section: str, links: TheoryLinks | None = None) -> bool:
        """Go to anchor ``section``: record it and ask the page (``links``) to scroll there.

        Parameters
        ----------
        section : str
            An anchor of the page (:attr:`anchors`), e.g. a model's ``spec.section``.
        links : TheoryLinks, optional
            The page's link component, which does the scrolling.

        Returns
        -------
        bool
            False (and nothing happens) when the page has no such anchor.
        """
        if section not in self.anchors:
            return False
        self.section = section
        if links is not None:
            links.scroll_to(section)
        return True

    def __panel__(self):
        return self.pane
