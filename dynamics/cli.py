"""Command line: ``python -m dynamics run --model canonical --beta 2 --t-end 5 --out run.csv``
and ``python -m dynamics sweep --grid beta=0.1:10:log:16 --grid gamma=0.1:100:log:16 …``.

Every :class:`~dynamics.settings.Settings` parameter is a flag spelled with
dashes (``--n-tokens``, ``--init-attention``). Without ``--out`` the CSV goes to
stdout; ``--summary`` prints a JSON summary instead. Bad flags or values exit
with status 2 and a message naming the parameter and its range.

``--weights`` is ``seed``, ``minilm`` (a real head: ``--sentence``, ``--layer``,
``--head``, ``--heads``), ``checkpoint`` (your own ``--text`` on any layer and head of a
BERT-style ``--checkpoint DIR``, default the installed MiniLM: :mod:`dynamics.bert`) or a
``.npz`` file of your own arrays (:mod:`dynamics.weights_file`):
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

# the weights file's arrays and reader, re-exported: the app and the tests read them here
from .weights_file import read_weights


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
    _add_setting_flags(run)
    run.add_argument("--normalise", choices=NORMALISED, default=None,
                     help="'sphere': the first-order Transformer flow with every token kept on "
                          "the unit sphere (the model 'sphere', whose M = W_V = I unless "
                          "--sphere-weights random); 'none': unnormalised (the model "
                          "'transformer', M and W_V from the seed)")
    run.add_argument("--t-end", type=float, default=10.0, help="final time (default 10)")
    run.add_argument("--every", type=int, default=1, help="record every n-th step (default 1)")
    run.add_argument("--rtol", type=float, default=None,
                     help="steps chosen by an error estimate at this relative tolerance "
                          "(default: fixed steps of dt)")
    run.add_argument("--out", help="output file: .csv, or .nc for NetCDF (default: CSV on stdout)")
    run.add_argument("--summary", action="store_true", help="print a JSON summary")
    _add_sweep_parser(sub)
    return parser


def _add_setting_flags(parser) -> None:
    """One flag per setting (``--n-tokens``), in a group ``settings``."""
    group = parser.add_argument_group("settings")
    for name in Settings.names():
        p = Settings.param[name]
        kw = {"type": _flag_type(p), "default": None, "help": f"{p.doc} (default {p.default!r})"}
        if name == "weights":
            kw["help"] = (f"{p.doc} Or a .npz file of your own arrays: X (N, d), optional "
                          "P, M, W_V (Part I) or A, V (Part II) (default 'seed')")
        elif isinstance(p, param.Selector):
            kw["choices"] = p.objects
        group.add_argument("--" + name.replace("_", "-"), dest=name, **kw)


def _add_sweep_parser(sub) -> None:
    from .sweeps import METRICS, ROUND_SIZE, WHERE, cache_dir

    sweep = sub.add_parser(
        "sweep", help="run a grid of settings (here or on dask.distributed) and write a "
                      "metric map",
        description="Run the base settings at every point of a grid (one --grid per swept "
                    "setting) and write one variable per metric to a NetCDF file. The points "
                    "run in this process or on a dask cluster, whichever the first point's "
                    "cost says ends sooner (--where forces either). A finished "
                    f"sweep is cached in {cache_dir()} ($ATTENTION_DYNAMICS_CACHE) and "
                    "reused when run again with the same settings.")
    _add_setting_flags(sweep)
    sweep.add_argument("--grid", action="append", required=True, metavar="NAME=SPEC",
                       help="a swept setting: name=lo:hi:log:n, name=lo:hi:lin:n or "
                            "name=v1,v2,… (repeat for more dimensions); with --adaptive a "
                            "range name=lo:hi[:log|lin] (a count is ignored), one or two")
    sweep.add_argument("--adaptive", type=int, default=None, metavar="POINTS",
                       help="an adaptive sweep of POINTS points: a quarter of them on a "
                            "uniform grid of the ranges (ends included, log where the range "
                            "says log), the rest placed by python-adaptive's learner where "
                            "the first metric changes fastest (a NetCDF file along one "
                            "dimension 'point')")
    sweep.add_argument("--round-size", type=int, default=ROUND_SIZE,
                       help="with --adaptive: points asked of the learner at a time (default "
                            f"{ROUND_SIZE}; part of what fixes the points chosen)")
    sweep.add_argument("--t-end", type=float, default=10.0, help="final time (default 10)")
    sweep.add_argument("--every", type=int, default=1, help="record every n-th step (default 1)")
    sweep.add_argument("--metric", action="append", choices=list(METRICS), dest="metrics",
                       help="a metric to keep (repeat; default: those of the model's part)")
    sweep.add_argument("--out", default="sweep.nc", help="NetCDF output file (default sweep.nc)")
    sweep.add_argument("--scheduler", metavar="ADDRESS",
                       help="run on an existing dask cluster (tcp://host:port) instead of "
                            "an embedded LocalCluster")
    sweep.add_argument("--where", choices=WHERE, default="auto",
                       help="auto (default): in this process or on a cluster, whichever the "
                            "first point's cost says ends sooner; local: every point in this "
                            "process; cluster: on the cluster")
    sweep.add_argument("--workers", type=int, default=None,
                       help="workers of the embedded cluster (default: the machine's cores)")
    sweep.add_argument("--batch-size", type=int, default=None,
                       help="grid points per task (default: about four tasks per worker)")
    sweep.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    sweep.add_argument("--quiet", action="store_true", help="no progress bar")


def _progress_bar(results, done, total) -> None:
    """``sweep [#####.....] 37/256 points`` on stderr, rewritten in place."""
    stream, width = sys.stderr, 30
    filled = int(width * done / max(total, 1))
    stream.write(f"\rsweep [{'#' * filled}{'.' * (width - filled)}] {done}/{total} points")
    if done >= total:
        stream.write("\n")
    stream.flush()


def _scheduler_client(parser, address: str):
    """A ``Client`` of the running scheduler ``--scheduler ADDRESS``: exit status 2 for an
    address that is not one, None (after a message) for a scheduler that does not answer."""
    import socket

    from distributed import Client
    from distributed.comm import parse_address, parse_host_port

    try:
        scheme, location = parse_address(address)
        host, port = parse_host_port(location) if scheme in ("tcp", "tls") else (None, None)
    except ValueError as err:
        parser.error(f"--scheduler {address!r} is not a scheduler address "
                     f"(tcp://host:port): {err}")
    try:
        if host is not None:  # a closed port: said at once, not after the client's retries
            socket.create_connection((host, port), timeout=5).close()
        return Client(address, timeout=20, set_as_default=False)
    except OSError as err:
        print(f"error: cannot reach --scheduler {address!r}: {err}", file=sys.stderr)
        return None


def _sweep_main(parser, args) -> int:
    from .sweeps import (
        AdaptiveRun,
        SweepRun,
        cache_path,
        dask_kept_out,
        netcdf_bytes,
        parse_axis,
        parse_range,
    )

    folder = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        parser.error(f"--out {args.out!r}: folder {folder!r} does not exist or is not writable")
    if args.scheduler and args.where == "local":
        parser.error("--where local runs every point in this process: drop --scheduler "
                     f"{args.scheduler!r} or choose --where cluster or auto")
    given = {k: v for k, v in vars(args).items() if k in Settings.names() and v is not None}
    try:
        grid = dict((parse_range if args.adaptive is not None else parse_axis)(text)
                    for text in args.grid)
        if len(grid) != len(args.grid):
            raise ValueError("--grid: a setting is swept twice")
        options = {"every": args.every, "batch_size": args.batch_size,
                   "workers": args.workers, "cache": not args.no_cache, "where": args.where,
                   "on_batch": None if args.quiet else _progress_bar}
        if args.adaptive is not None:
            run = AdaptiveRun(Settings(**given), grid, args.adaptive, args.t_end,
                              args.metrics, round_size=args.round_size, **options)
        else:
            run = SweepRun(Settings(**given), grid, args.t_end, args.metrics, **options)
    except ValueError as err:
        parser.error(str(err))
    client = None
    if args.scheduler:
        client = _scheduler_client(parser, args.scheduler)
        if client is None:
            return 1
        run.client = client
    try:
        result = run.run(keep_dask_out=True)
    except KeyboardInterrupt:
        run.cancel()
        print("\nsweep cancelled", file=sys.stderr)
        return 130
    finally:
        if client is not None:
            client.close()
    if run.cached and not args.quiet:
        print(f"reused the cached sweep {cache_path(run.key)}", file=sys.stderr)
    try:
        from .trajectory import write_atomically

        with dask_kept_out():  # this process ends here: Dask is of no use to it
            write_atomically(args.out, netcdf_bytes(result))
    except OSError as err:
        print(f"error: cannot write --out {args.out!r}: {err.strerror or err}", file=sys.stderr)
        return 1
    counts = {}
    for status in result["status"].values.ravel():
        counts[str(status)] = counts.get(str(status), 0) + 1
    print(json.dumps({"out": args.out, "points": run.total, "status": counts,
                      "cached": run.cached, "ran_on": run.ran_on,
                      "local_points": run.local_points,
                      "cluster_points": run.cluster_points}))
    return 0


#: ``--normalise``: the model of the first-order flow for each choice.
NORMALISED = {"none": "transformer", "sphere": "sphere"}


def _normalised_model(model, normalise):
    """The model asked for by ``--model`` and ``--normalise`` together (``ValueError`` for a
    model that is not the first-order flow)."""
    if normalise is None:
        return model
    if model not in (None, *NORMALISED.values()):
        raise ValueError(f"--normalise applies to the first-order Transformer flow "
                         f"(--model transformer), not to model {model!r}")
    return NORMALISED[normalise]


def _refuse_noise(settings, given) -> None:
    """``--logit-noise`` above 0 for a model that does not relax attention: a
    ``ValueError`` (it would be ignored, as the model never reads it)."""
    from . import models

    spec = models.get(settings.model)
    if given.get("logit_noise", 0.0) > 0.0 and "logit_noise" not in spec.reads():
        relaxing = [s.name for s in models.specs() if "logit_noise" in s.reads()]
        raise ValueError(f"logit_noise applies only to the models that relax attention "
                         f"({', '.join(relaxing)}); model {settings.model!r} does not")


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "sweep":
        return _sweep_main(parser, args)
    if args.out:
        folder = os.path.dirname(os.path.abspath(args.out))
        if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
            parser.error(f"--out {args.out!r}: folder {folder!r} does not exist or is not writable")
    given = {k: v for k, v in vars(args).items() if k in Settings.names() and v is not None}
    try:
        if args.normalise is not None:
            given["model"] = _normalised_model(given.get("model"), args.normalise)
        arrays = None
        if given.get("weights") not in (None, *Settings.param.weights.objects):
            arrays = read_weights(given.pop("weights"))
            X = np.asarray(arrays["features"])
            if X.ndim == 2:
                given.setdefault("n_tokens", X.shape[0])
                given.setdefault("dim", X.shape[1])
        settings = Settings(**given)
        _refuse_noise(settings, given)
        trajectory = simulate(settings, t_end=args.t_end, every=args.every, rtol=args.rtol,
                              arrays=arrays)
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
