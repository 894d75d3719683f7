"""Use cases, one module per resource: ladders, matches (reading them back), players,
predictions, matchmaking, recording (one match or a batch), rerate (void, rebuild, a
ladder's new parameters), importer (a match file) and auth (API keys).

Services coordinate the domain rules, the repositories and the rating core; they raise the
domain errors of ``app.errors`` and never commit (the request's transaction does).
"""
