"""The Hugging Face hub, asked only where it can answer.

`datasets`, `transformers` and `huggingface_hub` retry an unreachable hub for about 23 s
(five backed-off tries) before they read their cache or give up, so on a machine without the
hub a dry run or a trial would sit silent that long for every dataset and model it names.
Where the hub's host does not resolve and no proxy serves it, a load here runs as in a
process started with HF_HUB_OFFLINE=1: the cache only, at once. A name only a folder can have
asks no hub. The corpus reader, the model loader and the study check all load through
`cache_only_if_unreachable`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from trainables.errors import first_line

# A hub id is "name" or "owner/name" made of word characters, '-' and '.'.
_HUB_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")


def looks_like_path(name: str) -> bool:
    """Whether a model or dataset name can only mean a local path: hub ids contain at most one
    '/', so anything else path-shaped is meant as a local folder."""
    if name.startswith(("/", "./", "../", "~")) or name in (".", ".."):
        return True
    return (os.sep in name or (os.altsep or "/") in name) and not _HUB_ID.match(name)


def unreachable_host() -> str | None:
    """The hub's host name when it does not resolve on this machine and no proxy serves it (a
    proxy may reach what local DNS cannot), else None."""
    import urllib.request
    from urllib.parse import urlparse

    import huggingface_hub.constants

    if huggingface_hub.constants.HF_HUB_OFFLINE:
        return None
    endpoint = urlparse(huggingface_hub.constants.ENDPOINT)
    host = endpoint.hostname
    if not host:
        return None
    proxies = urllib.request.getproxies()
    if (proxies.get(endpoint.scheme) or proxies.get("all")) and not urllib.request.proxy_bypass(
        host
    ):
        return None
    return None if _resolves(host) else host


@functools.cache
def _resolves(host: str) -> bool:
    """Whether `host` has an address here; asked once per process (a resolver that drops its
    queries takes seconds to say no, and a study reads several splits and a model)."""
    import socket

    try:
        socket.getaddrinfo(host, 443)
    except (OSError, UnicodeError, ValueError):  # UnicodeError: a host that is not IDNA
        return False
    return True


CACHE_ONLY = "so only its cache was read"  # how a load error says the hub was not asked


def unreachable_hint(host: str | None) -> str:
    """The words a load error adds when only the cache was read, so the user sees why."""
    if host is None:
        return ""
    return f"; the hub's host {host} does not resolve here, {CACHE_ONLY}"


def only_cache_read(error: str) -> bool:
    """Whether a load that failed with `error` asked the Hugging Face cache alone: the hub's
    host did not resolve (`unreachable_hint`), or HF_HUB_OFFLINE is set."""
    import huggingface_hub.constants

    return CACHE_ONLY in error or bool(huggingface_hub.constants.HF_HUB_OFFLINE)


def load_failure(err: BaseException, host: str | None) -> str:
    """Why a load failed, on one line: the library's first line and, where the hub was not
    asked (`host` from `cache_only_if_unreachable`), that only its cache was read."""
    return f"{first_line(err).rstrip('.')}{unreachable_hint(host)}"


_OFFLINE_LOCK = threading.Lock()


@contextlib.contextmanager
def cache_only_if_unreachable(name: str) -> Iterator[str | None]:
    """Load `name` (a hub id or a folder) inside this block: offline where the hub cannot be
    reached, as it is otherwise. Yields the unreachable host, or None when nothing changed.

    The libraries read HF_HUB_OFFLINE once, at import, into the values patched here
    (transformers asks huggingface_hub's); the values are the process's, so one load at a time
    patches and restores them."""
    local = looks_like_path(name) or Path(name).expanduser().exists()
    host = None if local else unreachable_host()
    if host is None:
        yield None
        return
    import huggingface_hub.constants

    with _OFFLINE_LOCK:
        datasets_config = sys.modules.get("datasets.config")  # patched only where imported
        saved = huggingface_hub.constants.HF_HUB_OFFLINE
        saved_datasets = getattr(datasets_config, "HF_HUB_OFFLINE", None)
        huggingface_hub.constants.HF_HUB_OFFLINE = True
        if datasets_config is not None:
            datasets_config.HF_HUB_OFFLINE = True
        try:
            yield host
        finally:
            huggingface_hub.constants.HF_HUB_OFFLINE = saved
            if datasets_config is not None:
                datasets_config.HF_HUB_OFFLINE = saved_datasets
