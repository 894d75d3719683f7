"""The ``ratings`` command (``main``), one module per command group: ``server`` (serve,
migrate), ``keys`` (create, list, revoke), ``ladders`` (ladders create, list; import, rebuild)."""

import app.blas  # noqa: F401  (first of the app's imports: it must run before numpy loads)
