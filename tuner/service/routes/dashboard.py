"""The dashboard: one static page that asks for a token, then reads the API with it (tasks, their
status, a live tuning curve per task). The page holds no data itself, so it is served without a token;
every request it makes carries one, so it shows what that token may see: its own tasks (an admin
token's: every task)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

router = APIRouter(tags=["dashboard"])
PAGE = Path(__file__).parent.parent / "static" / "dashboard.html"


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def dashboard() -> HTMLResponse:
    return HTMLResponse(PAGE.read_text(), headers={"Cache-Control": "no-cache"})
