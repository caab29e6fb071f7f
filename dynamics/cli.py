"""Command line: ``python -m dynamics run --model canonical --beta 2 --t-end 5 --out run.csv``.

Every :class:`~dynamics.settings.Settings` parameter is a flag spelled with
dashes (``--n-tokens``, ``--init-attention``). Without ``--out`` the CSV goes to
stdout; ``--summary`` prints a JSON summary instead. Bad flags or values exit
with status 2 and a message naming the parameter and its range.

``--weights`` is ``seed``, ``minilm`` (a real head: ``--sentence``, ``--layer``,
``--head``, ``--heads``) or a ``.npz`` file of your own arrays (:data:`WEIGHT_ARRAYS`):
``X`` (N, d) and optionally ``P``, and Part I's ``M``, ``W_V`` or Part II's ``A``, ``V``;
``N`` and ``d`` come from ``X`` unless given.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
import param

from .settings import Settings
from .trajectory import simulate

#: The arrays of a ``--weights FILE.npz`` and the :class:`~dynamics.Simulation` arguments
#: they fill (the conventions of ``S = X M Xᵀ`` and ``O = A X W_Vᵀ``: see dynamics.heads).
WEIGHT_ARRAYS = {"X": "features", "P": "momenta", "M": "score_matrix",
                 "W_V": "value_matrix", "A": "kernel", "V": "value"}


def read_weights(path) -> dict:
    """The :class:`~dynamics.Simulation` arrays of a ``--weights`` file (``ValueError``
    naming a missing ``X``, an unknown array or an unreadable file)."""
    try:
        with np.load(path, allow_pickle=False) as f:
            found = {k: f[k] for k in f.files}
    except (OSError, ValueError) as err:
        raise ValueError(f"--weights {path!r}: cannot read it as a .npz file ({err})") from None
    unknown = sorted(set(found) - set(WEIGHT_ARRAYS))
    if unknown:
        raise ValueError(f"--weights {path!r}: unknown arrays {unknown}; expected "
                         f"{', '.join(WEIGHT_ARRAYS)}")
    if "X" not in found:
        raise ValueError(f"--weights {path!r} must hold the features X, shape (N, d)")
    return {WEIGHT_ARRAYS[k]: v for k, v in found.items()}


def _flag_type(p):
    if isinstance(p, param.Integer):
        return int
    if isinstance(p, param.Number):
        return float
    return str


def build_parser() -> argparse.ArgumentParser:
    """An argument parser whose flags come from :class:`Settings`."""
    parser = argparse.ArgumentParser(prog="python -m dynamics",
                                     description="Nonequilibrium attention dynamics.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="simulate one model and write its diagnostics")
    group = run.add_argument_group("settings")
    for name in Settings.names():
        p = Settings.param[name]
        kw = {"type": _flag_type(p), "default": None, "help": f"{p.doc} (default {p.default!r})"}
        if name == "weights":
            kw["help"] = (f"{p.doc} Or a .npz file of your own arrays: X (N, d), optional "
                          "P, M, W_V (Part I) or A, V (Part II) (default 'seed')")
        elif isinstance(p, param.Selector):
            kw["choices"] = p.objects
        group.add_argument("--" + name.replace("_", "-"), dest=name, **kw)
    run.add_argument("--t-end", type=float, default=10.0, help="final time (default 10)")
    run.add_argument("--every", type=int, default=1, help="record every n-th step (default 1)")
    run.add_argument("--out", help="output file: .csv, or .nc for NetCDF (default: CSV on stdout)")
    run.add_argument("--summary", action="store_true", help="print a JSON summary")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.out:
        folder = os.path.dirname(os.path.abspath(args.out))
        if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
            parser.error(f"--out {args.out!r}: folder {folder!r} does not exist or is not writable")
    given = {k: v for k, v in vars(args).items() if k in Settings.names() and v is not None}
    try:
        arrays = None
        if given.get("weights") not in (None, *Settings.param.weights.objects):
            arrays = read_weights(given.pop("weights"))
            X = np.asarray(arrays["features"])
            if X.ndim == 2:
                given.setdefault("n_tokens", X.shape[0])
                given.setdefault("dim", X.shape[1])
        settings = Settings(**given)
        trajectory = simulate(settings, t_end=args.t_end, every=args.every, arrays=arrays)
    except ValueError as err:
        parser.error(str(err))
    if args.out:
        try:
            if args.out.endswith((".nc", ".netcdf")):
                trajectory.to_netcdf(args.out)
            else:
                trajectory.to_csv(args.out)
        except OSError as err:
            print(f"error: cannot write --out {args.out!r}: {err.strerror or err}", file=sys.stderr)
            return 1
    if args.summary:
        print(json.dumps(trajectory.summary(), indent=2))
    elif not args.out:
        sys.stdout.write(trajectory.to_csv())
    return 0
