"""The Sweep tab: a phase diagram of one metric over two settings, computed by
:func:`dynamics.sweep` on a Dask cluster kept warm for the session."""
