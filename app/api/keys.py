"""API keys over HTTP (admin): make one (its secret shown once), list them (never a
secret), revoke one (refused from the next request on, by every worker and instance).
``ratings keys`` does the same from the command line."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response, status

from app.api.deps import AdminAccess, answer
from app.domain.documents.keys import KeyCreate, KeyCreated, KeyList, KeyOut
from app.services import auth

router = APIRouter(prefix="/keys", tags=["keys"])

PrefixPath = Annotated[
    str,
    Path(
        pattern=r"^rk_[0-9a-f]{8}$",
        description="The key's public prefix (`rk_` and 8 hex digits), as listed.",
    ),
]


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=KeyCreated,
    responses={409: {"description": "An active key has this name already."}},
    summary="Make an API key, shown this once (admin)",
)
async def create_key(body: KeyCreate, access: AdminAccess) -> Response:
    """The key is in the answer and nowhere else: the service keeps only its SHA-256."""
    return await answer(
        access,
        lambda session: auth.created_document(
            auth.create_key(session, name=body.name, scope=body.scope, ladders=body.ladders)
        ),
        status_code=status.HTTP_201_CREATED,
    )


@router.get("", response_model=KeyList, summary="Every API key, never a secret (admin)")
async def list_keys(access: AdminAccess) -> Response:
    return await answer(access, auth.key_list, read_only=True)


@router.delete(
    "/{prefix}",
    response_model=KeyOut,
    summary="Revoke an API key (admin)",
)
async def revoke_key(prefix: PrefixPath, access: AdminAccess) -> Response:
    """The next request with the key is a 401, on every worker and instance: no worker
    keeps a key, every request reads its row. 404 when no active key has this prefix."""
    return await answer(
        access,
        lambda session: auth.key_document(
            auth.revoke_key(session, name_or_prefix=prefix, by_prefix=True)
        ),
    )
