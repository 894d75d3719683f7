"""scipy.special's functions, imported on first use.

Importing ``scipy.special`` costs a process about 27 MB and a second of start-up, and the
rating core needs it only for its vectorised updates (``app.rating._vector``) and a few
model options; the scalar updates that rate one match use the ``math`` module. So the
core reads these names as attributes of this module (``_special.erfc(x)``), and the first
read imports scipy and keeps the function here: the same ufunc, so the same numbers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["erf", "erfc", "expit", "log_ndtr", "logsumexp", "ndtr"]

if TYPE_CHECKING:
    from scipy.special import erf, erfc, expit, log_ndtr, logsumexp, ndtr
else:

    def __getattr__(name: str) -> Any:
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module("scipy.special"), name)
        globals()[name] = value
        return value
