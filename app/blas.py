"""One BLAS thread per process, set before numpy loads (imported first by the command line).

The rating math multiplies small matrices (a few dozen rows at most). A BLAS thread pool
gains nothing there and, on a busy machine or beside other server workers, its threads spin:
an evaluation measured 2.5 times the processor time with the default pool. An operator's
own setting wins.
"""

from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
