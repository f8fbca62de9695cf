"""What differs between the pandas versions ajax_tune supports: reading floats back exactly."""

from __future__ import annotations

from typing import Any

__all__ = ["read_csv_exactly"]


def read_csv_exactly(path: Any, **kwargs: Any) -> Any:
    """`pandas.read_csv` with every float read back as the number that was written. pandas 3
    does so by default (and deprecates `float_precision`); pandas 2's default parser may be one
    bit off (0.30000000000000004 reads as 0.3) unless asked for `float_precision="round_trip"`."""
    import pandas as pd

    if int(pd.__version__.split(".")[0]) < 3:
        kwargs.setdefault("float_precision", "round_trip")
    return pd.read_csv(path, **kwargs)
