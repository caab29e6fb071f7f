"""Your own weights file, uploaded on the page (the main tab and the Inertial lab): read
with the limits of :func:`dynamics.cli.read_weights` and a size cap, its errors in the
file's own terms, and the picker emptied so that the same file can be chosen again.
"""

from __future__ import annotations

import io
import re

from dynamics.weights_file import WEIGHT_ARRAYS, read_weights

#: Largest upload accepted (bytes).
MAX_UPLOAD = 50_000_000


def in_file_terms(message: str) -> str:
    """``message`` with the :class:`~dynamics.Simulation` keywords of a weights file's
    arrays named by the file's keys (``score_matrix`` → ``M``, :data:`WEIGHT_ARRAYS`)
    and ``n_tokens``, ``dim`` as N, d: an upload's error speaks of what is in the file."""
    for key, keyword in WEIGHT_ARRAYS.items():
        message = re.sub(rf"\b{keyword}\b", key, message)
    return message.replace("n_tokens=", "N = ").replace("dim=", "d = ")


def read_upload(upload) -> dict:
    """The :class:`~dynamics.Simulation` arrays of the ``.npz`` file chosen in ``upload``
    (a :class:`panel.widgets.FileInput`), messages naming it by its file name;
    ``ValueError`` for a file over :data:`MAX_UPLOAD` or one :func:`read_weights` refuses."""
    name = upload.filename or "the file"
    if len(upload.value) > MAX_UPLOAD:
        raise ValueError(f"{name} is larger than {MAX_UPLOAD // 1_000_000} MB")
    return read_weights(io.BytesIO(upload.value), name=name)


def clear_upload(upload) -> None:
    """Empty ``upload`` (server and page), so that the same file can be chosen again."""
    upload.value = None
    upload.clear()
