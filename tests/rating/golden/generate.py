"""Regenerate every golden file of the rating core tests.

Run from the repository root:  .venv/bin/python -m tests.rating.golden.generate

Each generator is deterministic (fixed seeds), so a run on an unchanged tree rewrites the
same files; a diff after running it means an oracle package or a generator changed.
"""

from __future__ import annotations

from tests.rating.golden import (
    gen_elo,
    gen_plackett_luce,
    gen_trueskill,
    gen_weng_lin,
    gen_weng_lin_margin,
)


def main() -> None:
    for generator in (gen_trueskill, gen_plackett_luce, gen_weng_lin, gen_weng_lin_margin, gen_elo):
        generator.main()


if __name__ == "__main__":
    main()
