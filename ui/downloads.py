"""Streamed downloads: a link to a route of the server that sends a file while it is written.

``st.download_button`` holds the whole file in the server's memory (its media storage) while
the session lives; a million-row CSV is a few hundred MB per session and per click. The
dashboard's exports therefore go through a route of its own server,
``/_aflite/download/<token>``, mounted by ``serve.py`` (``streamlit run serve.py``, which
starts ``app.py`` as an ``st.App`` with this route). The route streams the bytes of a
*producer* (a function returning an iterator of byte chunks, e.g.
:func:`aflite_core.runs.exports.stream_view_csv`) as they are written, so memory stays at a
few chunks whatever the size of the file, and nothing is prepared until the link is clicked.

A page registers a producer with :func:`download` on each run, which draws the link. Tokens
are random (``secrets.token_urlsafe``), one per session and button (a rerun with the same
content keeps the token), and expire after :data:`TTL_S` seconds or when :data:`MAX_ENTRIES`
newer ones exist.

Started as ``streamlit run app.py`` (no route), :func:`download` falls back to
``st.download_button`` with the same bytes, built when the button is clicked.
"""

from __future__ import annotations

import secrets
import threading
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import streamlit as st
from starlette.responses import PlainTextResponse, StreamingResponse
from starlette.routing import Route
from streamlit.runtime.scriptrunner import get_script_run_ctx

#: The route's path; ``{token}`` names one registered download.
ROUTE = "/_aflite/download/{token}"
#: Seconds a registered download stays valid.
TTL_S = 2 * 3600
#: Registered downloads kept at most (the oldest go first).
MAX_ENTRIES = 256

Producer = Callable[[], Iterator[bytes]]


@dataclass
class _Entry:
    producer: Producer
    file_name: str
    mime: str
    signature: str
    created: float


_lock = threading.Lock()
_entries: OrderedDict[str, _Entry] = OrderedDict()
_owners: dict[tuple[str, str], str] = {}
_mounted = False


def routes() -> list[Any]:
    """The Starlette routes to mount in the dashboard's server (``serve.py``); from then on
    :func:`download` draws links to them."""
    global _mounted
    _mounted = True
    return [Route(ROUTE, endpoint=_endpoint, methods=["GET"])]


def mounted() -> bool:
    """Whether this server has the streaming route (started through ``serve.py``)."""
    return _mounted


def register(owner: tuple[str, str], producer: Producer, *, file_name: str, mime: str,
             signature: str) -> str:
    """Register ``producer`` for ``owner`` (session id, button key); return its token.

    The same owner with the same ``signature`` keeps its token (a rerun does not change the
    link); a new signature replaces the owner's previous download.
    """
    now = time.monotonic()
    with _lock:
        _expire(now)
        token = _owners.get(owner)
        entry = _entries.get(token) if token else None
        if entry is not None and entry.signature == signature:
            entry.producer, entry.created = producer, now
            _entries.move_to_end(token)
            return token
        if token:
            _entries.pop(token, None)
        token = secrets.token_urlsafe(24)
        _entries[token] = _Entry(producer, file_name, mime, signature, now)
        _owners[owner] = token
        while len(_entries) > MAX_ENTRIES:
            _entries.popitem(last=False)
        return token


def lookup(token: str) -> _Entry | None:
    """The registered download of ``token`` (None when unknown or expired)."""
    with _lock:
        _expire(time.monotonic())
        return _entries.get(token)


def _expire(now: float) -> None:
    for token in [t for t, e in _entries.items() if now - e.created > TTL_S]:
        del _entries[token]
    live = set(_entries)
    for owner in [o for o, t in _owners.items() if t not in live]:
        del _owners[owner]


def content_disposition(file_name: str) -> str:
    """``attachment`` with an ASCII file name and the exact one (RFC 6266 / 5987)."""
    ascii_name = "".join(c if c.isascii() and c.isprintable() and c not in '"\\;' else "_"
                         for c in file_name) or "download"
    return (f'attachment; filename="{ascii_name}"; '
            f"filename*=UTF-8''{urllib.parse.quote(file_name, safe='')}")


async def _endpoint(request: Any) -> Any:
    entry = lookup(str(request.path_params.get("token", "")))
    if entry is None:
        return PlainTextResponse(
            "This download link has expired or belongs to another server session. Go back "
            "to the dashboard and click the download again.", status_code=404)
    return StreamingResponse(entry.producer(), media_type=entry.mime, headers={
        "Content-Disposition": content_disposition(entry.file_name),
        "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"})


def _session_id() -> str:
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else "no-session"


def download(label: str, producer: Producer, *, file_name: str, mime: str, key: str,
             signature: str, help: str | None = None) -> None:
    """A download of ``producer``'s bytes: a link to the streaming route when the server
    has it, else an ``st.download_button`` (the bytes built in memory when clicked).

    Parameters
    ----------
    label : str
        The button's text.
    producer : callable
        Returns a fresh iterator of the file's byte chunks on each call.
    file_name, mime : str
        The name the browser saves the file under, and its type.
    key : str
        The button's widget key (unique on the page).
    signature : str
        Identifies the content: the same signature on a rerun keeps the link.
    help : str, optional
        Tooltip.
    """
    if mounted():
        token = register((_session_id(), key), producer, file_name=file_name, mime=mime,
                         signature=signature)
        st.link_button(label, ROUTE.replace("{token}", token), icon=":material/download:",
                       help=help)
        return
    st.download_button(label, data=lambda: b"".join(producer()), file_name=file_name,
                       mime=mime, key=key, icon=":material/download:", on_click="ignore",
                       help=help)
