"""The ``.npz`` file of your own arrays (``--weights FILE.npz``, an upload): the arrays
it may hold, the :class:`~dynamics.Simulation` arguments they fill, and how it is read.

Below the command line (:mod:`dynamics.cli`), the inertial lab
(:mod:`dynamics.inertial.lab_files`) and the app, which all take such a file.
"""

from __future__ import annotations

import math
import os
import zipfile
import zlib

import numpy as np

#: The arrays of a ``--weights FILE.npz`` and the :class:`~dynamics.Simulation` arguments
#: they fill (the conventions of ``S = X M Xᵀ`` and ``O = A X W_Vᵀ``: see dynamics.heads).
WEIGHT_ARRAYS = {"X": "features", "P": "momenta", "M": "score_matrix",
                 "W_V": "value_matrix", "A": "kernel", "V": "value"}
#: The most numbers one array of a weights file may hold (a 1024 × 1024 ``M`` or a
#: 1024 × 1024 ``X``, the largest the settings allow, has a quarter of it).
MAX_ELEMENTS = 1 << 22


def read_weights(path, name: str | None = None) -> dict:
    """The :class:`~dynamics.Simulation` arrays of a ``--weights`` file (``ValueError``
    naming a missing ``X``, an unknown array, an array of more than
    :data:`MAX_ELEMENTS` numbers or not of numbers, or a file that is not a ``.npz``
    archive).

    ``path`` is a path or a binary file object (an upload), ``name`` what messages call
    it (default ``--weights 'path'``). Each array's size is read from its header before
    it is loaded (a small compressed file cannot unpack gigabytes).
    """
    name = name or f"--weights {path!r}"
    if isinstance(path, (str, os.PathLike)):  # opened here: numpy leaves a bad zip open
        try:
            handle = open(path, "rb")  # noqa: SIM115 (closed by the with below)
        except OSError as err:
            raise ValueError(f"{name}: cannot read it as a .npz file ({err})") from None
        with handle:
            return read_weights(handle, name)
    found = {}
    try:
        f = np.load(path, allow_pickle=False)
        if not isinstance(f, np.lib.npyio.NpzFile):  # a .npy file: one array, no names
            raise ValueError(f"{name}: cannot read it as a .npz file (it holds one array "
                             "without a name: save X, P, ... with numpy.savez)")
        with f:
            for key in f.files:
                if key + ".npy" not in f.zip.namelist():  # not an array: named below
                    found[key] = None
                    continue
                with f.zip.open(key + ".npy") as member:
                    header = (np.lib.format.read_array_header_1_0
                              if np.lib.format.read_magic(member) == (1, 0)
                              else np.lib.format.read_array_header_2_0)
                    shape, _, dtype = header(member)
                if math.prod(shape) > MAX_ELEMENTS:
                    raise ValueError(f"{name}: array {key} of shape {shape} has more than "
                                     f"{MAX_ELEMENTS} numbers")
                if dtype.kind not in "biuf":
                    raise ValueError(f"{name}: array {key} holds {dtype} values, not "
                                     "real numbers")
                found[key] = f[key]
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error, KeyError) as err:
        raise ValueError(f"{name}: cannot read it as a .npz file ({err})") from None
    except ValueError as err:
        if str(err).startswith(name):
            raise
        # numpy reads what is not an archive as a pickle, which it refuses
        why = "it is not a .npz archive" if "pickle" in str(err) else str(err)
        raise ValueError(f"{name}: cannot read it as a .npz file ({why})") from None
    unknown = sorted(set(found) - set(WEIGHT_ARRAYS))
    if unknown:
        raise ValueError(f"{name}: unknown arrays {unknown}; expected "
                         f"{', '.join(WEIGHT_ARRAYS)}")
    if "X" not in found:
        raise ValueError(f"{name} must hold the features X, shape (N, d)")
    return {WEIGHT_ARRAYS[k]: v for k, v in found.items()}
