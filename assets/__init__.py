"""Data files of the dashboard (stylesheet, presets), installed as the package ``app.assets``.

This folder stays at the top level of the repository; ``pyproject.toml`` maps it to
``app.assets`` so that the files ship inside the wheel and are read through
``importlib.resources`` (``app/serving/resources.py``). The file makes it a regular package,
which an editable install can map to a folder outside ``app/``.
"""
