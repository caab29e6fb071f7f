"""The page of a slide: its size, its formats, its caption's text, and a figure written
as a file.

Sizes: :data:`SLIDE_INCHES` (13.333 × 7.5 in, PowerPoint's and Beamer-at-16:9's
page) at :data:`DPI` = 144: a 1920 × 1080 px PNG; the SVG and PDF are 960 × 540 pt.
"""

from __future__ import annotations

import io
import re
import textwrap
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # Matplotlib is imported when a slide is drawn, not with the page
    from matplotlib.figure import Figure

#: Pixels of a PNG slide, and its resolution.
PIXELS = (1920, 1080)
DPI = 144
#: Size of a slide (inches): 16:9.
SLIDE_INCHES = (PIXELS[0] / DPI, PIXELS[1] / DPI)
#: Formats a slide is written in, and their media types.
FORMATS = {"png": "image/png", "svg": "image/svg+xml", "pdf": "application/pdf"}


def plain_caption(markdown: str) -> str:
    """The text of a caption written in Markdown: no ``**``, ``*`` or link syntax, and no
    in-app navigation link ("Theory page: … ▸", a link on the page, not text of a slide)."""
    text = re.sub(r"\s*\[[^\]]*▸\]\([^)]*\)", "", markdown or "")
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    text = text.replace("**", "").replace("`", "")
    # *emphasis* (a star after a letter, as in A*, stays)
    text = re.sub(r"(?<![\w*])\*(?=\S)([^*]+?)\*(?![\w*])", r"\1", text)
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def wrap(text: str, width: int) -> str:
    """``text`` in lines of at most ``width`` characters (itself when it has none)."""
    return "\n".join(textwrap.wrap(text, width)) or text


def figure_bytes(fig: Figure, fmt: str) -> bytes:
    """``fig`` written as ``fmt`` (one of :data:`FORMATS`) at the slide's size.

    The SVG and PDF carry no creation date (the same run gives the same file).
    """
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    buf = io.BytesIO()
    metadata = {"Date": None} if fmt in ("svg", "pdf") else None
    fig.savefig(buf, format=fmt, dpi=DPI, metadata=metadata)
    return buf.getvalue()
