"""``python -m app tour-slides DIR [--formats png,svg,pdf] [--tour FILE]``: the slides of
every step of a guided tour at once (one headless run per step of the main tab).

``python -m app export-html OUT.html --settings QUERY [--t-end T]``: a run as one page that
opens from disk, offline, and plays (QUERY: the page's URL query, e.g.
``model=canonical&beta=2``). ``python -m app tour-html DIR [--tour FILE]``: the whole tour
as a static site (``index.html`` and one such page per step). Bad input exits with
status 2 and nothing written."""

from __future__ import annotations

import argparse

from app.teaching.tour import export_slides, load_tour


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    slides = sub.add_parser("tour-slides", help="write one slide per step of the main tab")
    slides.add_argument("out_dir")
    slides.add_argument("--formats", default="png,svg", help="among png, svg, pdf")
    slides.add_argument("--tour", default=None, help="a tour file (default: the shipped one)")
    add_page_commands(sub)
    args = parser.parse_args(argv)
    if args.command in PAGE_COMMANDS:
        return run_page_command(args)
    try:
        tour = load_tour(args.tour) if args.tour else None
        written = export_slides(args.out_dir, args.formats.split(","), tour)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}")
        return 2
    for path in written:
        print(path)
    return 0


#: The subcommands that write pages to take home (:func:`add_page_commands`).
PAGE_COMMANDS = ("export-html", "tour-html")


def add_page_commands(sub) -> None:
    """The subcommands ``export-html`` and ``tour-html``."""
    page = sub.add_parser("export-html", help="write a run as one standalone HTML page")
    page.add_argument("out")
    page.add_argument("--settings", required=True,
                      help="the page's URL query, e.g. model=canonical&beta=2&gamma=0.5")
    page.add_argument("--t-end", type=float, default=None,
                      help="time to run to (default: the preset's end, else 15)")
    site = sub.add_parser("tour-html", help="write the tour as a static site")
    site.add_argument("out_dir")
    site.add_argument("--tour", default=None, help="a tour file (default: the shipped one)")


def run_page_command(args) -> int:
    """Run ``export-html`` or ``tour-html``: 0, or 2 with ``error: <Name>: why``."""
    from app.teaching.standalone_page import ExportError, export_html
    from app.teaching.tour_site import tour_html

    try:
        if args.command == "export-html":
            written = [export_html(args.out, args.settings, args.t_end)]
        else:
            written = tour_html(args.out_dir, load_tour(args.tour) if args.tour else None)
    except ExportError as exc:
        print(f"error: {type(exc).__name__}: {exc}")
        return 2
    except (OSError, ValueError) as exc:
        print(f"error: {exc}")
        return 2
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
