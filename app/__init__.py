"""The Panel dashboard of attention-dynamics (``panel serve app/main.py``)."""

from .dashboard import Dashboard

__all__ = ["Dashboard"]
