"""``python -m app tour-slides DIR [--formats png,svg,pdf] [--tour FILE]``: the slides of
every step of a guided tour at once (one headless run per step of the main tab)."""

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
    args = parser.parse_args(argv)
    try:
        tour = load_tour(args.tour) if args.tour else None
        written = export_slides(args.out_dir, args.formats.split(","), tour)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}")
        return 2
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
