"""The token cache in front of the tokens table: lookups off the event loop, unknown tokens
remembered briefly, revocations through this process at once."""

import asyncio
import threading
from datetime import UTC, datetime

from tuner.database import Database
from tuner.database.tokens import create_token, revoke_token
from tuner.service import deps
from tuner.service.deps import TokenCache


def test_tokens_are_looked_up_off_the_event_loop_and_unknown_ones_remembered(
    tuning_db: Database, monkeypatch
):
    token_id, token = create_token(tuning_db, role="client", name="c")
    lookups: list[int] = []

    def authenticate(db: Database, secret: str):
        lookups.append(threading.get_ident())
        return real(db, secret)

    real = deps.authenticate
    monkeypatch.setattr(deps, "authenticate", authenticate)
    cache = TokenCache()

    async def requests() -> int:
        for secret in (token, token, "tt_forged", "tt_forged"):
            assert (await cache.authenticate(tuning_db, secret) is None) == (secret == "tt_forged")
        revoke_token(tuning_db, token_id=token_id, now=datetime.now(UTC))
        cache.forget(token_id)
        assert await cache.authenticate(tuning_db, token) is None
        return threading.get_ident()

    loop_thread = asyncio.run(requests())
    assert len(lookups) == 3 and loop_thread not in lookups
