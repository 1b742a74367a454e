"""Who may use a served console: tokens, the cookie that remembers one, the checks on a request.

Every request (the page, the websocket, the scripts and fonts) needs a token the server knows:
``?token=…`` in the URL (turned into a cookie, then dropped from the URL), the cookie, or an
``Authorization: Bearer …`` header. No token → 401, a wrong one → 403. Tokens are compared in
constant time (``hmac.compare_digest``) against every known token, so neither timing nor the
order of the book tells which one nearly matched. A browser on another site cannot ride the
cookie: it is ``SameSite=Strict`` and ``HttpOnly``, and a request whose ``Origin`` is not this
host is refused (cross-site websocket hijacking).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
from dataclasses import dataclass
from typing import Iterable, Mapping

MIN_TOKEN_LEN = 16
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$")
_TOKEN = re.compile(r"^[\x21-\x7e]+$")  # printable ASCII, no spaces: it travels in URLs and cookies


class TokenError(ValueError):
    """A token or tokens file that cannot be used; the message is one line for the operator."""


@dataclass(frozen=True)
class Credential:
    """One token and the operator name recorded for what its holder does."""

    name: str
    token: str

    @property
    def fingerprint(self) -> str:
        """A short, non-secret id for the token (printed and logged instead of the token)."""
        return hashlib.sha256(self.token.encode()).hexdigest()[:8]


def new_token() -> str:
    """A random token (256 bits), as Jupyter prints one."""
    return secrets.token_urlsafe(32)


def check_token(token: str, *, where: str = "--token") -> str:
    if not _TOKEN.match(token):
        raise TokenError(f"{where}: a token is printable ASCII without spaces")
    if len(token) < MIN_TOKEN_LEN:
        raise TokenError(f"{where}: a token needs at least {MIN_TOKEN_LEN} characters "
                         "(leave it out for a random one)")
    return token


def check_name(name: str, *, where: str = "--operator") -> str:
    if not _NAME.match(name):
        raise TokenError(f"{where}: an operator name is 1-64 characters of letters, digits and ._@+- "
                         f"(got {name[:40]!r})")
    return name


def parse_tokens_file(text: str, *, where: str) -> list[Credential]:
    """``NAME TOKEN`` per line; blank lines and ``#`` comments ignored; names and tokens unique."""
    creds: list[Credential] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2:
            raise TokenError(f"{where}:{n}: expected 'NAME TOKEN'")
        name = check_name(parts[0], where=f"{where}:{n}")
        token = check_token(parts[1], where=f"{where}:{n}")
        if any(c.name == name for c in creds):
            raise TokenError(f"{where}:{n}: the name {name} appears twice")
        if any(hmac.compare_digest(c.token.encode(), token.encode()) for c in creds):
            raise TokenError(f"{where}:{n}: this token is already given to another name")
        creds.append(Credential(name, token))
    if not creds:
        raise TokenError(f"{where}: no 'NAME TOKEN' line")
    return creds


class TokenBook:
    """The tokens a server accepts, each with the operator name its holder acts as."""

    def __init__(self, credentials: Iterable[Credential]) -> None:
        self.credentials = tuple(credentials)
        if not self.credentials:
            raise TokenError("no token")

    def lookup(self, token: str | None) -> Credential | None:
        """The credential for ``token``; compares with every token, each in constant time."""
        if not token:
            return None
        given = token.encode("utf-8", "surrogateescape")
        found = None
        for cred in self.credentials:
            if hmac.compare_digest(cred.token.encode(), given):
                found = cred
        return found


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1); every other host,
    including ``0.0.0.0``, ``::`` and names, may be reachable from elsewhere."""
    h = host.strip().strip("[]").lower()
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def cookie_name(port: int) -> str:
    # Cookies are shared by every port of a host: name ours by port so two servers do not clash.
    return f"warden_serve_{port}"


def request_token(query: Mapping[str, str], cookies: Mapping[str, str], headers: Mapping[str, str],
                  cookie: str) -> tuple[str | None, str]:
    """The token a request carries and where it came from (``query``, ``cookie``, ``header``)."""
    if "token" in query:
        return query["token"], "query"
    auth = headers.get("Authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip(), "header"
    if cookie in cookies:
        return cookies[cookie], "cookie"
    return None, ""


def same_origin(origin: str | None, host: str | None) -> bool:
    """A request with no ``Origin`` (not sent by a page) passes; one from a page must come from
    this very host (and port), so a page on another site cannot open our websocket."""
    if origin is None:
        return True
    m = re.match(r"^https?://([^/]+)$", origin.strip(), re.IGNORECASE)
    return bool(m and host and m.group(1).lower() == host.strip().lower())


__all__ = ["Credential", "TokenBook", "TokenError", "new_token", "check_token", "check_name",
           "parse_tokens_file", "is_loopback", "cookie_name", "request_token", "same_origin",
           "MIN_TOKEN_LEN"]
