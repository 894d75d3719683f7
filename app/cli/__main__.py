"""``python -m app.cli``: the ``ratings`` command."""

import sys

from app.cli.main import main

sys.exit(main())
