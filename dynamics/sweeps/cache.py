"""The cache of finished sweeps: where it is (:func:`cache_dir`), a sweep's key and file
(:func:`sweep_key`, :func:`cache_path`), and the NetCDF bytes of a result written without
importing Dask (:func:`netcdf_bytes`, :func:`dask_kept_out`).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from contextlib import contextmanager

#: Where :func:`cache_path` keeps finished sweeps (overridden by the environment variable
#: ``ATTENTION_DYNAMICS_CACHE``).
CACHE_ENV = "ATTENTION_DYNAMICS_CACHE"


def cache_dir() -> str:
    """The folder of cached sweeps: ``$ATTENTION_DYNAMICS_CACHE``, else
    ``$XDG_CACHE_HOME/attention-dynamics/sweeps`` (``~/.cache/…`` by default)."""
    if os.environ.get(CACHE_ENV):
        return os.environ[CACHE_ENV]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "attention-dynamics", "sweeps")


def sweep_key(base: Mapping, grid: Mapping, t_end: float, metrics: Sequence[str],
              every: int) -> str:
    """A SHA-256 of everything that fixes a sweep's result (and the package version)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("attention-dynamics")
    except PackageNotFoundError:
        release = "unknown"
    blob = json.dumps({"base": dict(base), "grid": {k: list(v) for k, v in grid.items()},
                       "t_end": float(t_end), "metrics": list(metrics), "every": int(every),
                       "version": release}, sort_keys=True, default=repr)
    return hashlib.sha256(blob.encode()).hexdigest()


@contextmanager
def dask_kept_out():
    """While active, ``import dask`` and ``import distributed`` raise ``ImportError``
    (nothing changes where Dask is imported already).

    For a process that has no use for Dask after its sweep ran here (the command line):
    xarray imports ``dask.array`` to build any Dataset where Dask is installed (a few
    tenths of a second of a small sweep's start-up), and remembers Dask as missing for
    the rest of the process.
    """
    if "dask" in sys.modules:
        yield
        return
    blocked = [name for name in ("dask", "distributed") if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None
    try:
        yield
    finally:
        for name in blocked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def netcdf_bytes(ds) -> bytes:
    """``ds.to_netcdf(engine="scipy")`` as bytes, without importing ``dask.distributed``.

    xarray asks dask for a distributed client before it writes; in a process that has not
    imported ``distributed`` there is none, and the import alone (about 0.6 s) would
    double the start-up of a small sweep. It is kept out while the file is written.
    """
    if "distributed" in sys.modules:
        return bytes(ds.to_netcdf(engine="scipy"))
    sys.modules["distributed"] = None  # an import of it raises ImportError: no client
    try:
        return bytes(ds.to_netcdf(engine="scipy"))
    finally:
        if "distributed" in sys.modules and sys.modules["distributed"] is None:
            del sys.modules["distributed"]


def cache_path(key: str) -> str:
    """The NetCDF file of the sweep with key ``key`` (:func:`sweep_key`)."""
    return os.path.join(cache_dir(), f"{key}.nc")


def open_cached(path: str):
    """The sweep cached in ``path`` (:func:`cache_path`), loaded into memory."""
    import xarray as xr

    with xr.open_dataset(path, engine="scipy") as ds:
        return ds.load()


def store(key: str, ds) -> None:
    """Write the sweep ``ds`` to its file in the cache (:func:`cache_path`), atomically."""
    from ..trajectory import write_atomically

    os.makedirs(cache_dir(), exist_ok=True)
    write_atomically(cache_path(key), netcdf_bytes(ds))
