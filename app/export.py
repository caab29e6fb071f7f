"""Download the recorded history of the current run as CSV or NetCDF.

The files are built in memory and sent to the browser through
``pn.widgets.FileDownload`` callbacks; nothing is written on the server. Each file is
named after the model, the run's time and the moment of the download
(:func:`filename`), and carries the run's settings: the CSV as commented header lines
``# name = value`` (values in JSON) before its table (``pandas.read_csv(path,
comment="#")`` reads the table; :func:`read_csv_settings` the settings), the NetCDF as
attributes.
"""

from __future__ import annotations

import io
import json
import time

import panel as pn

from dynamics import Trajectory

#: First line of a CSV download's header.
CSV_TITLE = "# attention-dynamics run: settings, then one row of diagnostics per frame"


def trajectory(dashboard) -> Trajectory:
    """The recorded frames of the dashboard's run as a :class:`dynamics.Trajectory`."""
    return Trajectory.from_frames(dashboard.settings, list(dashboard.history), dashboard.sim)


def filename(dashboard, extension: str, now: float | None = None) -> str:
    """A download's file name: model, time of the run and local time of the download.

    Parameters
    ----------
    dashboard : app.dashboard.Dashboard
    extension : str
        ``"csv"`` or ``"nc"``.
    now : float, optional
        Seconds since the epoch (default: now).

    Returns
    -------
    str
        E.g. ``canonical_t3.250_20261203-151502.csv`` (no path separator).
    """
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    return f"{dashboard.settings.model}_t{dashboard.sim.t:.3f}_{stamp}.{extension}"


def csv_header(settings) -> str:
    """Commented lines before the CSV table: a title and ``# name = value`` per setting.

    Parameters
    ----------
    settings : dynamics.Settings

    Returns
    -------
    str
        Lines ending in newlines; each value written as JSON.
    """
    lines = [CSV_TITLE]
    lines += [f"# {name} = {json.dumps(value)}" for name, value in settings.values().items()]
    return "\n".join(lines) + "\n"


def read_csv_settings(text: str) -> dict:
    """The settings in the header of a CSV download (the inverse of :func:`csv_header`)."""
    settings = {}
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        name, sep, value = line[1:].partition(" = ")
        if sep:
            settings[name.strip()] = json.loads(value)
    return settings


def csv_bytes(dashboard) -> io.BytesIO:
    """The settings (commented header) and the diagnostics table of the recorded frames."""
    text = csv_header(dashboard.settings) + trajectory(dashboard).to_csv()
    return io.BytesIO(text.encode())


def netcdf_bytes(dashboard) -> io.BytesIO:
    """States and diagnostics of the recorded frames, as NetCDF 3 (settings as attributes)."""
    return io.BytesIO(trajectory(dashboard).to_netcdf())


def _download(dashboard, label: str, extension: str, build) -> pn.widgets.FileDownload:
    button = pn.widgets.FileDownload(filename=filename(dashboard, extension), label=label,
                                     color="default", width=130)

    def callback():
        button.filename = filename(dashboard, extension)  # read after the callback
        return build(dashboard)

    button.callback = callback
    return button


def download_buttons(dashboard) -> pn.Row:
    """Two FileDownload buttons bound to ``dashboard``; each click names its file anew."""
    return pn.Row(_download(dashboard, "Download CSV", "csv", csv_bytes),
                  _download(dashboard, "Download NetCDF", "nc", netcdf_bytes))
