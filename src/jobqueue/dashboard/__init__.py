"""A live web dashboard of a queue: ``jobqueue dashboard FILE|URL``, or beside a worker.

:func:`create_app` (in :mod:`jobqueue.dashboard.app`) makes the Starlette app; :func:`server`
wraps it in a uvicorn server, either on its own (``jobqueue dashboard``: it stops on
SIGINT or SIGTERM) or as a task beside a :class:`~jobqueue.runner.Runner` on the same event
loop (``jobqueue worker FILE --dashboard``: the runner keeps the signals and stops the
server when it is done). The page shows a :class:`jobqueue.overview.Snapshot`, as the
notebook view does.

Introduced with the dashboard.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import uvicorn
from starlette.types import ASGIApp

from jobqueue.dashboard.app import LOCAL_HOSTS, create_app

__all__ = ["LOCAL_HOSTS", "create_app", "hosts_for", "server"]


class _BesideWorker(uvicorn.Server):
    """A uvicorn server that leaves SIGINT and SIGTERM to the worker it runs beside."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def server(app: ASGIApp, *, host: str, port: int, beside_worker: bool = False) -> uvicorn.Server:
    """A uvicorn server for ``app`` on ``host``:``port``, with no access log (the page polls).

    With ``beside_worker`` it installs no signal handlers: run ``serve()`` as a task and
    set ``should_exit`` to stop it. Otherwise ``run()`` serves until SIGINT or SIGTERM.
    """
    config = uvicorn.Config(app, host=host, port=port, access_log=False, log_level="warning")
    return _BesideWorker(config) if beside_worker else uvicorn.Server(config)


def hosts_for(host: str) -> tuple[str, ...]:
    """The ``Host`` names to answer on ``host``: any for 0.0.0.0 or ::, else it and localhost."""
    if host in ("0.0.0.0", "::", ""):
        return ("*",)
    return (*LOCAL_HOSTS, host)
