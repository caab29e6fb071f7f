"""The app's data files: the repository's top-level ``assets/`` folder.

``pyproject.toml`` maps ``assets/`` to the package ``app.assets`` (``package-dir``),
so the stylesheet and the presets ship inside the wheel and are read through
:mod:`importlib.resources`, the same way for an editable install (the files of the
source tree) and an installed wheel (the files in ``site-packages/app/assets``).
Every reader of an asset goes through :func:`asset`.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable

#: The package holding the data files (the top-level ``assets/`` folder).
ASSETS_PACKAGE = "app.assets"


def asset(*parts: str) -> Traversable:
    """The data file ``assets/<parts...>`` of the installed app.

    Parameters
    ----------
    *parts : str
        Path components below ``assets/``, e.g. ``("presets", "inertial.json")``.

    Returns
    -------
    importlib.resources.abc.Traversable
        A ``pathlib.Path`` when the package lies on the file system (editable install
        or unpacked wheel); the file itself is not opened, nor checked to exist.

    Raises
    ------
    FileNotFoundError
        The package ``app.assets`` is not installed (an editable install made before
        ``assets/`` was mapped into the package: run ``pip install -e .`` again).
    """
    try:
        root = resources.files(ASSETS_PACKAGE)
    except ModuleNotFoundError as err:
        raise FileNotFoundError(
            f"the app's data files (package {ASSETS_PACKAGE!r}, the folder assets/) are "
            "not installed; reinstall the project (pip install -e .)") from err
    path = root
    for part in parts:
        path = path / part
    return path


def read_asset(*parts: str) -> str:
    """The text (UTF-8) of the data file ``assets/<parts...>``; see :func:`asset`."""
    return asset(*parts).read_text(encoding="utf-8")
