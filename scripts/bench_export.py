"""Size and speed of the pages to take home (issue #39, item 3): a benchmark, not a test.

    .venv/bin/python scripts/bench_export.py [--checkpoint DIR] [--skip-tour]

Writes, into a temporary folder, and reports as JSON:

* the default run (N = 8, t = 15: ``python -m app export-html``), target ≤ 3 MB;
* a real head of 32 word pieces (your own sentence through a BERT-style checkpoint:
  ``--checkpoint DIR``, else ``$ATTENTION_DYNAMICS_CHECKPOINT``, else the installed
  MiniLM; without one, a seeded run of N = 32, the same arrays), target ≤ 10 MB;
* the whole shipped tour (``python -m app tour-html``), target ≤ 60 MB in ≤ 3 minutes;

each with its wall time, and the machine's load average (the figures depend on it).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import scipy.linalg  # noqa: F401  (BLAS loaded before its threads are limited)
import threadpoolctl

WORDS = ("the quick brown fox jumps over the lazy dog while the patient teacher explains "
         "how attention relaxes towards its softmax target and why the energy of the "
         "tokens only goes down").split()


def _sentence(checkpoint: str | None, pieces: int = 32) -> tuple[str, int]:
    """The longest prefix of :data:`WORDS` of at most ``pieces`` word pieces ([CLS] and
    [SEP] included), and how many it has."""
    from dynamics import bert

    ck = bert.open_checkpoint(checkpoint)
    best = ("", 0)
    for n in range(1, len(WORDS) + 1):
        try:
            count = len(ck.tokenize(" ".join(WORDS[:n]))[1])
        except ValueError:  # more than the checkpoint takes
            break
        if count > pieces:
            break
        best = (" ".join(WORDS[:n]), count)
    if best[1] < pieces and len(ck.tokenize(best[0] + ".")[1]) == best[1] + 1:
        best = (best[0] + ".", best[1] + 1)  # a full stop: one piece more
    return best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--skip-tour", action="store_true")
    args = parser.parse_args(argv)
    threadpoolctl.threadpool_limits(1)
    from app.teaching.standalone_page import export_html, run_html, settings_run, write_page
    from app.teaching.tour_site import tour_html
    from dynamics import Settings

    out = Path(tempfile.mkdtemp(prefix="take_home_"))
    report = {"load_average": os.getloadavg()}
    t0 = time.perf_counter()
    path = export_html(out / "default.html", "model=canonical")
    report["default_run"] = {"MB": path.stat().st_size / 1e6,
                             "seconds": time.perf_counter() - t0, "target_MB": 3}
    t0 = time.perf_counter()
    checkpoint = args.checkpoint or os.environ.get("ATTENTION_DYNAMICS_CHECKPOINT")
    try:
        text, pieces = _sentence(checkpoint)
        settings = Settings(model="canonical", weights="checkpoint", text=text, layer=3,
                            head=5, **({"checkpoint": checkpoint} if checkpoint else {}))
        what = f"real head, {pieces} word pieces ({text!r})"
    except (ValueError, ImportError) as err:
        settings, what = Settings(model="canonical", n_tokens=32), f"seeded N = 32 ({err})"
    run = settings_run(settings, 15.0)
    path = write_page(out / "head32.html", run_html(run))
    report["head_32"] = {"what": what, "N": run.n_tokens, "MB": path.stat().st_size / 1e6,
                         "seconds": time.perf_counter() - t0, "target_MB": 10}
    if not args.skip_tour:
        t0 = time.perf_counter()
        paths = tour_html(out / "tour")
        report["tour"] = {"pages": len(paths),
                          "MB": sum(p.stat().st_size for p in paths) / 1e6,
                          "largest_MB": max(p.stat().st_size for p in paths) / 1e6,
                          "seconds": time.perf_counter() - t0, "target_MB": 60,
                          "target_seconds": 180}
    report["load_average_after"] = os.getloadavg()
    report["folder"] = str(out)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
