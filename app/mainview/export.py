"""Download the recorded history of the current run as CSV or NetCDF.

The files are built in memory and sent to the browser through
``pn.widgets.FileDownload`` callbacks; nothing is written on the server. Each file is
named after the model, the run's time and the moment of the download
(:func:`filename`), and carries the run's settings: the CSV in its last column,
:data:`SETTINGS_COLUMN`, as one JSON object in the first row (a plain
``pandas.read_csv(path)`` reads the table, ``json.loads(table[SETTINGS_COLUMN][0])`` or
:func:`read_csv_settings` the settings; the 39 ``#`` lines before the table that this
replaces needed ``comment="#"``), the NetCDF as attributes.
"""

from __future__ import annotations

import csv
import io
import json
import time

import panel as pn

from dynamics import Trajectory

#: Last column of a CSV download: the run's settings as a JSON object, in the first row.
SETTINGS_COLUMN = "settings_json"


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


def with_settings(table: str, settings) -> str:
    """``table`` (CSV text, a header line and one line per row) with the
    :data:`SETTINGS_COLUMN` column: ``settings.values()`` as JSON in the first row, empty
    in the others (no ``#`` line: a plain ``pandas.read_csv`` reads the file)."""
    rows = list(csv.reader(io.StringIO(table)))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    cells = [json.dumps(settings.values())] + [""] * (len(rows) - 2)
    writer.writerow([*rows[0], SETTINGS_COLUMN])
    for row, cell in zip(rows[1:], cells, strict=True):
        writer.writerow([*row, cell])
    return out.getvalue()


def read_csv_settings(text: str) -> dict:
    """The settings of a CSV download (its :data:`SETTINGS_COLUMN` in the first row; an
    older download's ``# name = value`` lines before the table)."""
    if text.startswith("#"):
        settings = {}
        for line in text.splitlines():
            if not line.startswith("#"):
                break
            name, sep, value = line[1:].partition(" = ")
            if sep:
                settings[name.strip()] = json.loads(value)
        return settings
    rows = csv.reader(io.StringIO(text))
    header, first = next(rows), next(rows)
    return json.loads(first[header.index(SETTINGS_COLUMN)])


def csv_bytes(dashboard) -> io.BytesIO:
    """The diagnostics table of the recorded frames, the settings in its last column."""
    text = with_settings(trajectory(dashboard).to_csv(), dashboard.settings)
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


def page_bytes(dashboard) -> io.BytesIO:
    """The run recorded so far as one page that opens offline and plays
    (:mod:`app.teaching.standalone_page`: A beside A*, the lag, the energy, the tokens)."""
    from app.teaching.standalone import PageRun
    from app.teaching.standalone_page import run_html

    sim = dashboard.sim
    run = PageRun.from_frames(dashboard.settings, list(dashboard.history), sim.changes,
                              sim.message if sim.status != "running" else "")
    return io.BytesIO(run_html(run).encode("utf-8"))


def page_button(dashboard) -> pn.widgets.FileDownload:
    """The FileDownload "Page to take home (.html)" (beside the slide exports)."""
    button = _download(dashboard, "Page to take home (.html)", "html", page_bytes)
    button.width = 264
    return button


def download_buttons(dashboard) -> pn.Row:
    """Two FileDownload buttons bound to ``dashboard``; each click names its file anew."""
    return pn.Row(_download(dashboard, "Download CSV", "csv", csv_bytes),
                  _download(dashboard, "Download NetCDF", "nc", netcdf_bytes))
