"""The domain: what a ladder's configuration, a match outcome, a paging cursor and a match's
result document are. Plain values and rules; no session, no web."""
