"""Use cases, one module per resource or step: ladders, matches (reading them back),
players, predictions, matchmaking, rating (the step every recording and re-rating shares),
recording (single matches in groups), batches (a batch, and one rated ahead), rerate (void,
rebuild, a ladder's new parameters), erasure, jobs, importer (a match file), fitting and
auth (API keys, console sessions).

Services coordinate the domain's rules, the repositories and the rating core; they raise
the domain's errors (``app.errors``) and never open or commit a transaction: they work in
the caller's session, and a use case that needs transactions of its own is handed a
``Transact`` (``app.storage.unit_of_work``) by its caller.
"""
