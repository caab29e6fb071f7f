"""Download the recorded history of the current run as CSV or NetCDF.

The files are built in memory and sent to the browser through
``pn.widgets.FileDownload`` callbacks; nothing is written on the server.
"""

from __future__ import annotations

import io

import panel as pn

from dynamics import Trajectory


def trajectory(dashboard) -> Trajectory:
    """The recorded frames of the dashboard's run as a :class:`dynamics.Trajectory`."""
    return Trajectory.from_frames(dashboard.settings, list(dashboard.history), dashboard.sim)


def csv_bytes(dashboard) -> io.BytesIO:
    """The diagnostics table of the recorded frames, as CSV."""
    return io.BytesIO(trajectory(dashboard).to_csv().encode())


def netcdf_bytes(dashboard) -> io.BytesIO:
    """States and diagnostics of the recorded frames, as NetCDF 3."""
    return io.BytesIO(trajectory(dashboard).to_netcdf())


def download_buttons(dashboard) -> pn.Row:
    """Two FileDownload buttons bound to ``dashboard``."""
    return pn.Row(
        pn.widgets.FileDownload(callback=lambda: csv_bytes(dashboard), filename="run.csv",
                                label="Download CSV", color="default", width=130),
        pn.widgets.FileDownload(callback=lambda: netcdf_bytes(dashboard), filename="run.nc",
                                label="Download NetCDF", color="default", width=130),
    )
