"""API tokens: random bearer secrets with a role. Only a token's sha256 is stored, so a stolen copy of
the database grants nothing; a token is shown once, when it is created. Tokens carry 256 random bits,
so a fast hash is enough (there is nothing to brute-force, unlike a password)."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from tuner.database.database import Database
from tuner.database.records import Role
from tuner.database.schema import TokenRow

PREFIX = "tt_"


@dataclass(frozen=True)
class TokenInfo:
    id: int
    name: str
    role: Role
    created_at: datetime
    revoked_at: datetime | None


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(db: Database, *, role: str, name: str) -> tuple[int, str]:
    """A new token of `role`; returns its id and the secret (which is not stored)."""
    role = Role(role)
    token = PREFIX + secrets.token_urlsafe(32)
    with db.transaction() as session:
        row = TokenRow(name=name, role=role.value, token_hash=hash_token(token))
        session.add(row)
        session.flush()
        return row.id, token


def authenticate(db: Database, token: str) -> TokenInfo | None:
    """The token's holder, or None for an unknown or revoked token."""
    with db.transaction() as session:
        row = session.scalar(
            select(TokenRow).where(TokenRow.token_hash == hash_token(token), TokenRow.revoked_at.is_(None))
        )
        return _info(row) if row else None


class LastAdmin(Exception):
    """Revoking this token would leave no admin token: nobody could create tokens, approve hardware or
    revoke a leaked one any more."""


def revoke_token(db: Database, *, token_id: int, now: datetime) -> None:
    """Raises KeyError for an unknown token, LastAdmin for the last admin token in use. The admin
    tokens in use are locked in id order first, so two admins revoking each other at once cannot
    both succeed."""
    with db.transaction() as session:
        row = session.get(TokenRow, token_id)
        if row is None:
            raise KeyError(token_id)
        if row.role == Role.ADMIN and row.revoked_at is None:
            active = select(TokenRow.id).where(
                TokenRow.role == Role.ADMIN.value, TokenRow.revoked_at.is_(None)
            )
            admins = list(session.scalars(active.order_by(TokenRow.id).with_for_update()))
            if admins == [token_id]:
                raise LastAdmin(f"token {token_id} is the last admin token: create another one first")
        session.refresh(row)
        row.revoked_at = row.revoked_at or now


def tokens(db: Database) -> list[TokenInfo]:
    with db.transaction() as session:
        return [_info(row) for row in session.scalars(select(TokenRow).order_by(TokenRow.id))]


def _info(row: TokenRow) -> TokenInfo:
    return TokenInfo(row.id, row.name, Role(row.role), row.created_at, row.revoked_at)
