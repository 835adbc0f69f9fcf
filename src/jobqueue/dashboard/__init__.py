"""A live web dashboard of a queue: ``jobqueue dashboard FILE|URL``, or beside a worker.

:func:`create_app` (in :mod:`jobqueue.dashboard.app`) makes the Starlette app; :func:`server`
wraps it in a uvicorn server that its caller stops: on SIGINT or SIGTERM (``jobqueue
dashboard``), or when the :class:`~jobqueue.runner.Runner` beside it on the same event loop
is done (``jobqueue worker FILE --dashboard``: the runner keeps the signals). The page
shows a :class:`jobqueue.overview.Snapshot`, as the notebook view does.

Introduced with the dashboard.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import uvicorn
from starlette.types import ASGIApp

from jobqueue.dashboard.app import LOCAL_HOSTS, create_app

__all__ = ["LOCAL_HOSTS", "create_app", "hosts_for", "server"]


class _Server(uvicorn.Server):
    """A uvicorn server that installs no signal handlers: its owner sets ``should_exit``."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def server(app: ASGIApp, *, host: str, port: int) -> uvicorn.Server:
    """A uvicorn server for ``app`` on ``host``:``port``, with no access log (the page polls).

    It leaves the signals to its caller (uvicorn's own handlers would take SIGTERM from a
    runner on the same loop, and raise it again once done): run ``serve()`` as a task, and
    set ``should_exit`` to stop it.
    """
    config = uvicorn.Config(app, host=host, port=port, access_log=False, log_level="warning")
    return _Server(config)


def hosts_for(host: str) -> tuple[str, ...]:
    """The ``Host`` names to answer on ``host``: any for 0.0.0.0 or ::, else it and localhost."""
    if host in ("0.0.0.0", "::", ""):
        return ("*",)
    return (*LOCAL_HOSTS, host)
