"""A skill-rating service: TrueSkill, the Elo family and Plackett-Luce over HTTP."""
