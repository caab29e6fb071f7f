"""The Sweep tab's map as files: NetCDF (as ``python -m dynamics sweep`` writes it, the
settings in its attributes) and CSV (one row per point), from download buttons.
"""

from __future__ import annotations

import io

import numpy as np
import panel as pn

from dynamics.sweeps import netcdf_bytes


def example_dataset(example: dict):
    """The shipped example (:func:`~app.sweeps.example.read_example`) as a grid sweep's
    ``xarray.Dataset``: its metric and status over its two settings, its base settings as
    attributes."""
    import xarray as xr

    c = example["choices"]
    dims = [c["x"], c["y"]]  # the grid's order (the JSON's rows run along y)
    values = np.array([[np.nan if v is None else v for v in row] for row in example["values"]],
                      dtype=float).T
    status = np.array(example["status"], dtype=object).T
    attrs = {f"setting_{k}": (int(v) if isinstance(v, bool) else v)
             for k, v in example["base"].items() if k not in dims}
    attrs.update(t_end=c["t_end"], every=1, swept=", ".join(dims), metrics=c["metric"])
    return xr.Dataset({c["metric"]: (dims, values), "status": (dims, status)},
                      coords={c["x"]: np.array(example["x_values"], float),
                              c["y"]: np.array(example["y_values"], float)}, attrs=attrs)


def csv_bytes(ds) -> bytes:
    """``ds`` as CSV: one row per point, a column per swept setting and per variable."""
    return ds.to_dataframe().reset_index().to_csv(index=False).encode()


def download_buttons(dataset) -> tuple[pn.widgets.FileDownload, pn.widgets.FileDownload]:
    """"Download NetCDF" and "Download CSV" buttons of the map ``dataset()`` returns (the
    file made when pressed; nothing while there is no map)."""

    def file(kind):
        def make():
            ds = dataset()
            if ds is None:
                return None
            return io.BytesIO(netcdf_bytes(ds) if kind == "nc" else csv_bytes(ds))
        return make

    return (pn.widgets.FileDownload(callback=file("nc"), filename="sweep.nc",
                                    label="Download NetCDF", width=140, embed=False),
            pn.widgets.FileDownload(callback=file("csv"), filename="sweep.csv",
                                    label="Download CSV", width=140, embed=False))
