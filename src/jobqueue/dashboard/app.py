"""The dashboard's web application: one page, a JSON snapshot it polls, and three actions.

Routes (all relative, so the app may sit behind a proxy under a prefix):

- ``GET /``: the page (``static/page.html``), with this process's CSRF token in it.
- ``GET /api/snapshot``: :meth:`jobqueue.overview.Snapshot.to_json`, polled every 2 s.
- ``POST /api/dead-letters/replay`` and ``POST /api/dead-letters/discard``, body
  ``{"id": "..."}``: replay or discard one dead letter; ``POST /api/jobs/cancel``, the
  same body: cancel a waiting or running job (``queue.cancel``). Each needs the header
  ``X-CSRF-Token`` with the token of the page (a per-process secret, compared in constant
  time); without it, or with a wrong one, the answer is 403. A read-only app refuses them
  (403) and its page shows no buttons.
- ``/static/...``: the page's script and styles, and uPlot (MIT, vendored: no CDN).

Safety: the app answers only requests whose ``Host`` is one it was told (localhost by
default), so a web page elsewhere cannot reach it by rebinding its own name to 127.0.0.1;
it forbids framing; and nothing it sends names more of the database than ``where``
(:attr:`~jobqueue.backends.postgres.PostgresQueue.server`, never a password). Storage
errors answer 503 with their message (which names the server, never a password); any
other error a bare 500.

Introduced with the dashboard.
"""

from __future__ import annotations

import hmac
import html
import json
import secrets
from collections.abc import Sequence
from pathlib import Path
from string import Template

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from jobqueue.backends.contract import Queue
from jobqueue.errors import DeadLetterNotFoundError, InvalidSettingError, JobNotFoundError, StorageError
from jobqueue.overview import snapshot

STATIC = Path(__file__).parent / "static"
"""The page, its script and styles, and the vendored chart library."""

LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]")
"""The ``Host`` names the app answers by default."""

ACTIONS = {
    ("dead-letters", "replay"): "replayed: waiting again",
    ("dead-letters", "discard"): "discarded",
    ("jobs", "cancel"): "{outcome}",
}
"""The POST actions, by ``(kind, action)`` of their path ``api/KIND/ACTION``: each action the
name of a queue method taking a job id, and what the answer says once it is done
(``{outcome}``: what the method returned, such as cancel's ``"cancelling"``)."""

TOKEN_HEADER = "X-CSRF-Token"
"""The request header that must carry the page's CSRF token on every POST."""

_HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}


def create_app(
    queue: Queue,
    *,
    where: str,
    read_only: bool = False,
    token: str | None = None,
    allowed_hosts: Sequence[str] = LOCAL_HOSTS,
) -> Starlette:
    """The dashboard of ``queue`` as an ASGI app (serve it with uvicorn).

    Args:
        queue: the queue to show; it must have the
            :class:`~jobqueue.backends.contract.ShowsOverview` reads.
        where: how the page names the queue: its file, or ``queue.server``. Never a URL,
            which may hold a password.
        read_only: show no buttons and refuse every POST (403).
        token: the CSRF token; default a fresh random one (``secrets.token_urlsafe``).
        allowed_hosts: the ``Host`` names to answer (``"*"`` for any: only behind a
            proxy that checks them).

    Queue calls run in a worker thread, so a slow database never blocks the event loop
    (which, under ``jobqueue worker --dashboard``, also runs the jobs).
    """
    secret = token if token is not None else secrets.token_urlsafe(32)
    page = Template((STATIC / "page.html").read_text(encoding="utf-8")).substitute(
        where=html.escape(where), token=html.escape(secret), read_only=json.dumps(read_only)
    )

    async def index(request: Request) -> Response:
        return HTMLResponse(page, headers=_HEADERS)

    async def state(request: Request) -> Response:
        try:
            taken = await run_in_threadpool(snapshot, queue, where=where)
        except StorageError as exc:  # its message names the server, never a password
            return _message(503, f"cannot read the queue: {exc}")
        return JSONResponse(taken.to_json() | {"read_only": read_only}, headers=_HEADERS)

    async def act(request: Request) -> Response:
        kind, action = request.path_params["kind"], request.path_params["action"]
        if (kind, action) not in ACTIONS:
            known = " or ".join(f"{k}/{a}" for k, a in ACTIONS)
            return _message(404, f"no action {kind}/{action}: {known}")
        if read_only:
            return _message(403, "this dashboard is read-only: replay, discard and cancel are off")
        sent = request.headers.get(TOKEN_HEADER, "")
        if not hmac.compare_digest(sent.encode(), secret.encode()):
            return _message(403, f"missing or wrong {TOKEN_HEADER} header: reload the page")
        try:
            body = await request.json()
        except ValueError:
            return _message(400, 'expected a JSON body {"id": "..."}')
        job_id = body.get("id") if isinstance(body, dict) else None
        if not isinstance(job_id, str) or not job_id:
            return _message(400, f'expected a JSON body {{"id": "..."}} with a non-empty id, got {body!r}')
        try:
            outcome = await run_in_threadpool(getattr(queue, action), job_id)
        except (DeadLetterNotFoundError, JobNotFoundError, InvalidSettingError) as exc:
            return _message(404, str(exc))
        except StorageError as exc:
            return _message(503, f"cannot {action} {job_id!r}: {exc}")
        return _message(200, f"{job_id} {ACTIONS[kind, action].format(outcome=outcome)}")

    return Starlette(
        routes=[
            Route("/", index),
            Route("/api/snapshot", state),
            Route("/api/{kind:str}/{action:str}", act, methods=["POST"]),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))],
    )


def _message(status: int, text: str) -> Response:
    return JSONResponse({"message": text}, status_code=status, headers=_HEADERS)
