"""API tokens (admin only): create one per person, CI job or worker machine; revoke when it leaks."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, status

from tuner.database.tokens import LastAdmin, create_token, revoke_token, tokens
from tuner.service.clock import now as clock_now
from tuner.service.deps import AdminToken, DatabaseDep
from tuner.service.errors import AUTH, BODY, documented
from tuner.service.schemas import IdPath, TokenCreate, TokenCreated, TokenPublic

router = APIRouter(prefix="/v1/tokens", tags=["tokens"], responses=documented(*AUTH))


@router.post("", status_code=status.HTTP_201_CREATED, responses=documented(*BODY))
def create(body: TokenCreate, db: DatabaseDep, _: AdminToken) -> TokenCreated:
    token_id, secret = create_token(db, role=body.role, name=body.name)
    info = next(t for t in tokens(db) if t.id == token_id)
    return TokenCreated(**vars(info), token=secret)


@router.get("")
def list_tokens(db: DatabaseDep, _: AdminToken) -> list[TokenPublic]:
    return [TokenPublic(**vars(t)) for t in tokens(db)]


@router.delete("/{token_id}", status_code=status.HTTP_204_NO_CONTENT, responses=documented(404, 409))
def revoke(request: Request, token_id: IdPath, db: DatabaseDep, _: AdminToken) -> None:
    """409 for the last admin token in use: the service would have nobody to administer it."""
    try:
        revoke_token(db, token_id=token_id, now=clock_now(db))
    except KeyError:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no token {token_id}") from None
    except LastAdmin as e:
        raise HTTPException(status.HTTP_409_CONFLICT, str(e)) from None
    request.app.state.tokens.forget(token_id)
