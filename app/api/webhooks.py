"""Webhooks (admin): register a receiver for some types of event (the secret its deliveries
are signed with shown once), list and delete receivers, list a receiver's deliveries
(``app.services.webhooks`` sends them)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response, status

from app.api.deps import AdminAccess, NowDep, answer
from app.domain.documents.shared import DEFAULT_PAGE, MAX_PAGE
from app.domain.documents.webhooks import (
    DeliveryPage,
    WebhookCreate,
    WebhookCreated,
    WebhookList,
    WebhookOut,
)
from app.services import webhooks

router = APIRouter(prefix="/webhooks", tags=["webhooks"])

HookPath = Annotated[
    str, Path(min_length=1, max_length=32, pattern=r"^wh_[0-9a-f]{16}$", description="The id.")
]


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=WebhookCreated,
    summary="Register a receiver of events (admin)",
)
async def create_webhook(body: WebhookCreate, access: AdminAccess, now: NowDep) -> Response:
    """It gets the events of `events`' types (of `ladders`, or of every ladder) written
    from now on, each POSTed as JSON with `Ratings-Event-Id` and `Ratings-Signature:
    t=<unix time>,v1=<hex HMAC-SHA256 of "<t>.<body>" with the secret>`; the secret is in
    this answer alone. At least once, in order per ladder; an event that fails is retried
    with backoff (1 s, doubling, at most 5 minutes apart) for `RATINGS_WEBHOOK_RETRY_S`
    (a day), then marked failed."""
    return await answer(
        access,
        lambda session: webhooks.create_webhook(session=session, body=body, now=now),
        status_code=status.HTTP_201_CREATED,
    )


@router.get("", response_model=WebhookList, summary="Every receiver, never a secret (admin)")
async def list_webhooks(access: AdminAccess) -> Response:
    return await answer(
        access, lambda session: webhooks.list_webhooks(session=session), read_only=True
    )


@router.delete("/{webhook_id}", response_model=WebhookOut, summary="Delete a receiver (admin)")
async def delete_webhook(webhook_id: HookPath, access: AdminAccess) -> Response:
    """Nothing more is sent to it (a POST under way may finish); its deliveries go too."""
    return await answer(
        access, lambda session: webhooks.delete_webhook(session=session, hook_id=webhook_id)
    )


@router.get(
    "/{webhook_id}/deliveries",
    response_model=DeliveryPage,
    summary="A receiver's deliveries, the latest attempted first (admin)",
)
async def list_deliveries(
    webhook_id: HookPath,
    access: AdminAccess,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
    cursor: Annotated[str | None, Query(max_length=1024)] = None,
) -> Response:
    """Each event sent to it: `delivered`, `retrying` (with `next_attempt_at`) or
    `failed` (given up on), with its attempts and the last error."""
    return await answer(
        access,
        lambda session: webhooks.delivery_page(
            session=session, hook_id=webhook_id, limit=limit, cursor=cursor
        ),
        read_only=True,
    )
