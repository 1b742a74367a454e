"""Tokens, names, hosts and the request checks of `warden serve` (pure functions; no server)."""

from __future__ import annotations

import random
import string

import pytest

from console.serve.auth import (
    MIN_TOKEN_LEN, Credential, TokenBook, TokenError, check_name, check_token, cookie_name, is_loopback,
    new_token, parse_tokens_file, request_token, same_origin,
)

ALPHABET = string.ascii_letters + string.digits + "-_.~!$*+"


def tokens(n: int, seed: int = 19) -> list[str]:
    rnd = random.Random(seed)
    return ["".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(MIN_TOKEN_LEN, 90))) for _ in range(n)]


def near_misses(token: str) -> list[str]:
    out = [token[:-1], token + token[-1], token[1:], token.upper() if token.upper() != token else token.lower(),
           token[::-1] if token[::-1] != token else token + "x", "", token + "\0", token + " "]
    for i in (0, len(token) // 2, len(token) - 1):
        out.append(token[:i] + ("a" if token[i] != "a" else "b") + token[i + 1:])
    return [t for t in out if t != token]


def test_new_tokens_are_long_random_and_accepted() -> None:
    made = {new_token() for _ in range(200)}
    assert len(made) == 200
    for t in made:
        assert len(t) >= 43 and check_token(t) == t


@pytest.mark.parametrize("bad", ["", "short", "x" * (MIN_TOKEN_LEN - 1), "has space inside the token",
                                 "tab\tinside-the-token", "ünïcödé-token-value", "line\nbreak-token-value",
                                 "x" * 20 + "\x7f"])
def test_unusable_tokens_are_refused_with_one_line(bad: str) -> None:
    with pytest.raises(TokenError) as e:
        check_token(bad)
    assert "\n" not in str(e.value)


def test_book_finds_exactly_its_tokens() -> None:
    toks = tokens(40)
    book = TokenBook(Credential(f"user{i}", t) for i, t in enumerate(toks))
    for i, t in enumerate(toks):
        cred = book.lookup(t)
        assert cred is not None and cred.name == f"user{i}"
        for miss in near_misses(t):
            if miss not in toks:
                assert book.lookup(miss) is None, repr(miss)
    assert book.lookup(None) is None
    assert book.lookup("\udcff" * 20) is None  # undecodable input is just a wrong token


def test_fingerprint_names_the_token_without_revealing_it() -> None:
    seen = set()
    for t in tokens(100, seed=3):
        fp = Credential("x", t).fingerprint
        assert len(fp) == 8 and fp not in t and set(fp) <= set("0123456789abcdef")
        seen.add(fp)
    assert len(seen) == 100


@pytest.mark.parametrize("name", ["alice", "bob.ops@team", "c", "a" * 64, "ops+1", "x-y_z"])
def test_operator_names_accepted(name: str) -> None:
    assert check_name(name) == name


@pytest.mark.parametrize("name", ["", "-dash-first", "a" * 65, "has space", "evil\x1b[31m", "quote'", "semi;colon",
                                  "new\nline", "ünï"])
def test_operator_names_refused(name: str) -> None:
    with pytest.raises(TokenError):
        check_name(name)


def test_tokens_file() -> None:
    toks = tokens(5, seed=5)
    text = "# team\n\n" + "\n".join(f"  user{i}\t{t}  " for i, t in enumerate(toks)) + "\n"
    creds = parse_tokens_file(text, where="f")
    assert [(c.name, c.token) for c in creds] == [(f"user{i}", t) for i, t in enumerate(toks)]


@pytest.mark.parametrize("text,fragment", [
    ("", "no 'NAME TOKEN'"),
    ("# only a comment\n", "no 'NAME TOKEN'"),
    ("alice\n", "f:1: expected"),
    ("alice tok en extra-words-here\n", "f:1: expected"),
    ("alice " + "a" * 20 + "\nalice " + "b" * 20 + "\n", "f:2: the name alice appears twice"),
    ("alice " + "a" * 20 + "\nbob " + "a" * 20 + "\n", "f:2: this token is already given"),
    ("alice short\n", "f:1: a token needs at least"),
    ("al ice " + "a" * 20 + "\n", "f:1: expected"),
    ("-x " + "a" * 20 + "\n", "f:1: an operator name"),
])
def test_tokens_file_refused(text: str, fragment: str) -> None:
    with pytest.raises(TokenError) as e:
        parse_tokens_file(text, where="f")
    assert fragment in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("host,loop", [
    ("127.0.0.1", True), ("127.8.9.10", True), ("localhost", True), ("LOCALHOST", True), ("::1", True),
    ("[::1]", True), ("0.0.0.0", False), ("::", False), ("", False), ("10.0.0.5", False), ("192.168.1.2", False),
    ("example.com", False), ("localhost.evil.example", False), ("127.0.0.1.nip.io", False), ("::ffff:10.0.0.1", False),
    ("fe80::1", False),
])
def test_loopback(host: str, loop: bool) -> None:
    assert is_loopback(host) is loop


def test_request_token_sources() -> None:
    c = cookie_name(8123)
    assert c == "warden_serve_8123" and cookie_name(8124) != c
    assert request_token({"token": "q"}, {c: "k"}, {"Authorization": "Bearer h"}, c) == ("q", "query")
    assert request_token({}, {c: "k"}, {"Authorization": "Bearer h"}, c) == ("h", "header")
    assert request_token({}, {c: "k"}, {"Authorization": "bearer  h "}, c) == ("h", "header")
    assert request_token({}, {c: "k"}, {"Authorization": "Basic abc"}, c) == ("k", "cookie")
    assert request_token({}, {"warden_serve_1": "k"}, {}, c) == (None, "")
    assert request_token({}, {}, {}, c) == (None, "")


@pytest.mark.parametrize("origin,host,ok", [
    (None, "127.0.0.1:8000", True),
    ("http://127.0.0.1:8000", "127.0.0.1:8000", True),
    ("https://warden.example.org", "warden.example.org", True),
    ("HTTP://Warden.Example.org", "warden.example.org", True),
    ("http://127.0.0.1:8001", "127.0.0.1:8000", False),
    ("http://evil.example", "127.0.0.1:8000", False),
    ("http://127.0.0.1:8000.evil.example", "127.0.0.1:8000", False),
    ("null", "127.0.0.1:8000", False),
    ("http://127.0.0.1:8000/path", "127.0.0.1:8000", False),
    ("http://127.0.0.1:8000", None, False),
    ("file://", "127.0.0.1:8000", False),
])
def test_same_origin(origin: str | None, host: str | None, ok: bool) -> None:
    assert same_origin(origin, host) is ok
