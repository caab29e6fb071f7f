"""KaTeX inside Panel's shadow DOM, offline: its stylesheet in the pane, its fonts in the page.

Panel renders every pane in a shadow root, which the page's stylesheets do not reach;
its KaTeX pane therefore shows KaTeX's MathML output, which Chromium draws without
accents (no bar over ``C̄``) and with small ``\\Big`` brackets. The fix, in two parts:

* :data:`STYLESHEET`, given to each KaTeX pane (``stylesheets=[...]``): KaTeX's own CSS
  (the copy Panel ships beside the KaTeX script it loads, so the two versions match),
  showing KaTeX's HTML output instead of the MathML.
* :data:`FONT_FACES`, added to the document's head by :func:`install_fonts`: ``@font-face``
  rules with the KaTeX fonts the app ships (``assets/katex/fonts``, MIT licence) inlined
  as data URIs, so nothing is fetched from the network. Browsers ignore ``@font-face``
  inside a shadow root; at document level the fonts reach every shadow root.

The font families are renamed (``KaTeX_Main`` → ``App-KaTeX_Main``) in both parts: the
page also holds Panel's copy of KaTeX's CSS, whose ``@font-face`` rules name font files
Panel does not ship, and a renamed family never makes the browser request those.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

import panel as pn

from .resources import asset

#: Prefix of the renamed KaTeX font families.
FAMILY_PREFIX = "App-"


def _panel_katex_css() -> str:
    """KaTeX's stylesheet as shipped with Panel ("" if this Panel has none)."""
    try:
        from panel.models.katex import KATEX_VERSION
    except ImportError:
        return ""
    path = (Path(pn.__file__).parent / "dist" / "bundled" / "katex" / f"katex@{KATEX_VERSION}"
            / "dist" / "katex.min.css")
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def stylesheet() -> str:
    """CSS for a KaTeX pane's shadow root: KaTeX's rules with renamed font families.

    Returns
    -------
    str
        KaTeX's stylesheet without its ``@font-face`` rules, font families renamed with
        :data:`FAMILY_PREFIX`, and KaTeX's HTML output shown (Panel hides it); "" when
        Panel ships no KaTeX stylesheet (the pane then keeps Panel's MathML output).
    """
    css = _panel_katex_css()
    if not css:
        return ""
    css = re.sub(r"@font-face\s*\{[^}]*\}", "", css)
    css = css.replace("KaTeX_", FAMILY_PREFIX + "KaTeX_")
    return css + "\nspan.katex-html { display: inline; }\n"


def font_faces() -> str:
    """``@font-face`` rules for the shipped KaTeX fonts, inlined as data URIs.

    Returns
    -------
    str
        One rule per ``assets/katex/fonts/KaTeX_<Family>-<Variant>.woff2``: family
        ``App-KaTeX_<Family>``, italic when the variant says so, weight 700 when bold.
    """
    rules = []
    for font in sorted(asset("katex", "fonts").iterdir(), key=lambda f: f.name):
        if not font.name.endswith(".woff2"):
            continue
        family, variant = font.name[: -len(".woff2")].split("-", 1)
        data = base64.b64encode(font.read_bytes()).decode("ascii")
        rules.append(
            f"@font-face {{ font-family: {FAMILY_PREFIX}{family}; "
            f"font-style: {'italic' if 'Italic' in variant else 'normal'}; "
            f"font-weight: {700 if 'Bold' in variant else 400}; "
            f"src: url(data:font/woff2;base64,{data}) format('woff2'); }}")
    return "\n".join(rules)


#: The stylesheet of every KaTeX pane of the app (:func:`stylesheet`).
STYLESHEET = stylesheet()
#: The document-level font rules (:func:`font_faces`).
FONT_FACES = font_faces()


def install_fonts() -> None:
    """Add :data:`FONT_FACES` to the document's head (``pn.config.global_css``).

    In a server session this changes that session's config only; call it before the
    page is rendered (the dashboard does, when it is built). Idempotent.
    """
    if FONT_FACES and FONT_FACES not in pn.config.global_css:
        pn.config.global_css = [*pn.config.global_css, FONT_FACES]
