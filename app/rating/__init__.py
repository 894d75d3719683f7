"""The rating core: pure functions of ratings and outcomes (standard library and numpy).

```python
from app.rating import Rating, TrueSkill, PlackettLuce, Elo, Glicko2
ts = TrueSkill()
new_teams = ts.rate([[ts.rating()], [ts.rating()]])   # winner listed first
```
"""

from app.rating.base import (
    CONSERVATIVE_K,
    Rating,
    RatingInputError,
    RatingModel,
    VolatileRating,
    age,
    widen,
)
from app.rating.elo import Elo
from app.rating.glicko2 import Glicko2
from app.rating.plackett_luce import PlackettLuce
from app.rating.registry import ALGORITHMS, make_model
from app.rating.trueskill import TrueSkill

__all__ = [
    "ALGORITHMS",
    "CONSERVATIVE_K",
    "Elo",
    "Glicko2",
    "PlackettLuce",
    "Rating",
    "RatingInputError",
    "RatingModel",
    "TrueSkill",
    "VolatileRating",
    "age",
    "make_model",
    "widen",
]
