"""The domain: what a ladder's configuration, a match outcome, a paging cursor, a match's
result document and a pseudonym are, the request and response documents of the API
(``documents``: pydantic models every layer above reads), and the one reader of match
files (``match_files``). Plain values and rules over the
rating core: no session, no HTTP."""
