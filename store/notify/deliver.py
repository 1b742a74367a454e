"""Sending one message through apprise (the ``notify`` extra): one URL, one try, the error as a line.

apprise knows the services (ntfy, Slack, Discord, Telegram, e-mail, Matrix, a plain JSON webhook, …)
and their URL forms; Warden writes no client of its own. A send is bounded: apprise's connect and
read timeouts are set on the URL (``cto``/``rto``, unless the URL sets them) and the whole call has
``SEND_TIMEOUT_S``. apprise reports a failure through its log; the last warning or error it logged
is the delivery's ``last_error``.
"""

from __future__ import annotations

import logging
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import apprise

from store.text import safe_line

SEND_TIMEOUT_S = 30.0
CONNECT_S = 5.0
READ_S = 15.0
CLICK_SCHEMES = ("ntfy", "ntfys")  # services whose URL takes the link a tap on the notification opens


def bounded_url(url: str, click: str | None) -> str:
    """The URL with Warden's timeouts (unless set) and, for ntfy, the link a tap opens."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    keys = {k for k, _ in query}
    if "cto" not in keys:
        query.append(("cto", f"{CONNECT_S:g}"))
    if "rto" not in keys:
        query.append(("rto", f"{READ_S:g}"))
    if click and parts.scheme.lower() in CLICK_SCHEMES and "click" not in keys:
        query.append(("click", click))
    return urlunsplit(parts._replace(query=urlencode(query)))


def send(url: str, title: str, body: str, *, click: str | None = None) -> str | None:
    """Send once; None when apprise says it was delivered, else why not (one line)."""
    a = apprise.Apprise()
    if not a.add(bounded_url(url, click)):
        return "apprise cannot use this URL"
    with apprise.LogCapture(level=logging.WARNING) as captured:
        try:
            ok = bool(a.notify(body=body, title=title, body_format=apprise.NotifyFormat.TEXT))
        except Exception as e:  # a plugin's own bug must not end the notifier: it is this delivery's error
            return safe_line(f"{type(e).__name__}: {e}", limit=300)
        log = captured.getvalue()
    if ok:
        return None
    lines = [ln.split(" - ", 2)[-1] for ln in log.splitlines() if ln.strip()]
    return safe_line(lines[-1] if lines else "apprise could not deliver it", limit=300)


__all__ = ["send", "bounded_url", "SEND_TIMEOUT_S"]
