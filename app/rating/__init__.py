"""The rating core: pure functions of ratings and outcomes (standard library and numpy).

```python
from app.rating import Rating, TrueSkill, PlackettLuce, Elo, Glicko2, predict_rank
ts = TrueSkill()
new_teams = ts.rate([[ts.rating()], [ts.rating()]])   # winner listed first
predict_rank(ts, new_teams)                           # [(rank, probability), ...]
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
from app.rating.bradley_terry import BradleyTerryFull, BradleyTerryPart
from app.rating.elo import Elo
from app.rating.glicko2 import Glicko2
from app.rating.plackett_luce import PlackettLuce
from app.rating.quality import PredictedRank, predict_rank
from app.rating.registry import ALGORITHMS, make_model
from app.rating.thurstone_mosteller import ThurstoneMostellerFull, ThurstoneMostellerPart
from app.rating.trueskill import TrueSkill

__all__ = [
    "ALGORITHMS",
    "CONSERVATIVE_K",
    "BradleyTerryFull",
    "BradleyTerryPart",
    "Elo",
    "Glicko2",
    "PlackettLuce",
    "PredictedRank",
    "Rating",
    "RatingInputError",
    "RatingModel",
    "ThurstoneMostellerFull",
    "ThurstoneMostellerPart",
    "TrueSkill",
    "VolatileRating",
    "age",
    "make_model",
    "predict_rank",
    "widen",
]
