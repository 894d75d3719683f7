"""Every query the service makes, by what it stores: one module each for ladders, ratings
and ranks, matches and their history, recording, re-rating, erasure, jobs, prediction
accuracy and API keys, and what they share (``sql``). Functions take the session and
keyword-only arguments, flush when they must, and never commit: the caller's transaction
does."""
