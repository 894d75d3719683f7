"""Recording matches, and voiding them (their reads: ``app.api.reads``)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response, status

from app.api.deps import (
    ACCEPTED,
    AdminAccess,
    NowDep,
    PreferHeader,
    WriteAccess,
    ladder_of,
    rerating,
    run,
)
from app.api.metrics import MATCHES_RECORDED
from app.api.params import LadderPath, MatchIdPath
from app.api.writer import GroupWriter
from app.domain.documents.matches import (
    MAX_BATCH,
    MAX_BATCH_SLOTS,
    BatchResult,
    MatchBatch,
    MatchCreate,
    MatchResult,
    VoidResult,
)
from app.domain.documents.shared import MAX_ID_LENGTH, MAX_PLAYERS
from app.services import auth, batches, rerate
from app.services.recording import Submitted

router = APIRouter(prefix="/ladders/{ladder}/matches", tags=["matches"])


BATCH_DESCRIPTION = f"""\
Apply the matches in list order in one transaction: either every one is recorded or none.
Each result is exactly what `POST .../matches` answers for that match; a match_id recorded
before with the same body gives its stored result and is not applied again. The ratings
equal posting the matches one by one.

A batch has three bounds, each refused before any work is done:

- at most {MAX_BATCH:,} matches, and at most {MAX_BATCH_SLOTS:,} player slots (each match's
  players summed: {MAX_BATCH:,} one-on-one matches hold {2 * MAX_BATCH:,},
  {MAX_BATCH_SLOTS // MAX_PLAYERS} matches of {MAX_PLAYERS} players hold
  {MAX_BATCH_SLOTS // MAX_PLAYERS * MAX_PLAYERS:,}): past either, 422 naming the limit and
  the number found;
- the request body's size, `RATINGS_MAX_BODY_BYTES` (16 MiB by default): past it, 413. A
  batch at the slot bound with player ids of {MAX_ID_LENGTH} characters is about 7 MB;
  {MAX_BATCH:,} matches that each carry 4 KB of `meta` do not fit.

Every batch within the bounds is recorded under the default settings. Measured at the bounds
(`benchmarks/batch.py`, one worker, 2 shared cores): 1.2 to 10 seconds, answers of up to
19 MB; the worker's memory peaked 80 to 150 MB above its resting size at the slot bound,
240 to 280 MB with a 16 MiB body of `meta`, and came back to within about 45 MB of it
afterwards. On SQLite the database takes one writer at a time: other writes wait for the batch.
"""


def _json(text: str, status_code: int) -> Response:
    # The stored document, byte for byte: a retried request sees exactly the first answer.
    return Response(content=text, status_code=status_code, media_type="application/json")


def _batch_json(results: list[tuple[str, bool]]) -> Response:
    """``{"results": [...]}`` of the stored documents, encoded once into one buffer as each
    document is let go: a large batch's answer is held about once, not as the documents,
    their joined text and its bytes at the same time."""
    body = bytearray(b'{"results":[')
    for n in range(len(results)):
        if n:
            body += b","
        body += results[n][0].encode()
        results[n] = ("", False)
    body += b"]}"
    return Response(
        content=memoryview(body), status_code=status.HTTP_201_CREATED, media_type="application/json"
    )


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=MatchResult,
    responses={
        200: {
            "description": "A retry: this match_id and body were recorded before.",
            "model": MatchResult,
        },
        409: {"description": "This match_id was recorded with a different body."},
    },
    summary="Record a match (write)",
)
async def record_match(
    body: MatchCreate, ladder: LadderPath, access: WriteAccess, now: NowDep, request: Request
) -> Response:
    # Written with the other single matches waiting in this worker, in one transaction
    # (app.api.writer); the stored document goes out as it is (the response model only
    # documents it).
    writer: GroupWriter = request.app.state.group_writer
    text, created = await writer.record(
        Submitted(ladder_id=ladder, key_digest=auth.hash_key(access.key or ""), body=body, now=now)
    )
    if created:
        MATCHES_RECORDED.inc()
    return _json(text, status.HTTP_201_CREATED if created else status.HTTP_200_OK)


@router.post(
    "/batch",
    status_code=status.HTTP_201_CREATED,
    response_model=BatchResult,
    responses={
        409: {"description": "A match_id was recorded with a different body (named by index)."},
        413: {"description": "The body is larger than the server's limit (16 MiB by default)."},
        422: {
            "description": "A bad match (named by index, e.g. `matches.3.teams`), or more "
            f"than {MAX_BATCH:,} matches or {MAX_BATCH_SLOTS:,} player slots (named with "
            "the number found); nothing of the batch is written."
        },
    },
    summary=f"Record up to {MAX_BATCH:,} matches ({MAX_BATCH_SLOTS:,} players in all) in "
    "order, all or nothing (write)",
    description=BATCH_DESCRIPTION,
)
async def record_batch(
    body: MatchBatch, ladder: LadderPath, access: WriteAccess, now: NowDep
) -> Response:
    # Rated first, in a read (no write lock held while the batch is rated); then written
    # in one transaction, all or nothing (rated again there if its players moved meanwhile).
    ahead = await run(
        access,
        lambda session: batches.batch_ahead(
            session=session, ladder_id=ladder, bodies=body.matches, now=now
        ),
        read_only=True,
    )
    results = await run(
        access,
        lambda session: batches.record_batch(
            session=session, ladder_id=ladder, bodies=body.matches, now=now, ahead=ahead
        ),
        bulk=True,
    )
    MATCHES_RECORDED.inc(sum(1 for _, created in results if created))
    return _batch_json(results)


@router.delete(
    "/{match_id}",
    response_model=VoidResult,
    responses=ACCEPTED,
    summary="Void a match and re-rate what it reached (admin)",
)
async def void_match(
    match_id: MatchIdPath,
    ladder: LadderPath,
    access: AdminAccess,
    now: NowDep,
    prefer: PreferHeader = None,
) -> Response:
    """Void a match (cheating, a bad report): every later match it reaches (its players',
    then theirs, transitively) is re-rated as if it had never been played, so ratings,
    history and leaderboard equal a replay without it. In one transaction.

    The match stays readable, marked `"voided": true` with `voided_at` and the numbers it
    had; it leaves its players' history and match counts (a player whose only match it was
    leaves the leaderboard). Voiding it again changes nothing and answers 200 with
    `already_voided: true`. Seeded ratings keep their place between a player's matches.

    A void of more later matches than `RATINGS_REBUILD_INLINE_MAX`, or sent with
    `Prefer: respond-async`, or of a ladder with a job pending, is answered at once with
    `202 Accepted` and a job (`Location: /v1/jobs/{id}`) whose `result` is, once it has
    succeeded, this summary."""
    return await rerating(
        access,
        lambda session: rerate.plan_void(
            session=session, ladder=ladder_of(session, ladder), match_id=match_id
        ),
        lambda session: rerate.void_match(
            session=session, ladder=ladder_of(session, ladder), match_id=match_id, now=now
        ),
        prefer=prefer,
        now=now,
    )
