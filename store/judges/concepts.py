"""What a line of agent text is about, order ignored: its content words (pure, no database).

``store/judges/novelty.py`` judges new information on normalised lines; two lines that say the same
thing in other words ("the database refused the connection" / "Connection refused by the DB,
retrying") differ as lines but not as **concepts**. :func:`concepts` turns a normalised line into
that set:

1. **Phrases** that say one thing in several words become one word: "could not find", "no such",
   "does not exist" → ``missing``; "timed out" → ``timeout``; "0 results", "nothing found",
   "no matches" → ``none result``; "permission denied" → ``denied``; "failed to", "unable to",
   "could not" → ``fail``.
2. **Tokens**: words, and *specific* tokens kept whole — anything with a digit, ``_``, ``.``,
   ``/``, ``\\``, ``:``, ``@`` or ``#`` inside (``test_login``, ``src/app.py``, ``db-3:5432``): names
   of things, the part of a line that carries its facts. Placeholders of volatile values
   (``<n>``, ``<time>``, …) are dropped.
3. **Stop words** go: function words, pronouns, and what an agent says while it repeats itself
   (again, still, another, retry, tried, keep, now, seems, got, returned …).
4. **Stemming** (a small suffix stripper: refused/refusing/refuse → ``refus``; connection →
   ``connect``) and **synonyms** (a small built-in list: error/failure/crash → ``fail``; db →
   ``database``; rejected/denied/declined → ``refus``; locate/discover → ``find`` …).

Progress toward a stated total is read by ``store/judges/fields.py``.
"""

from __future__ import annotations

import functools
import re
from typing import Iterable

# ---------------------------------------------------------------------- phrases
_NOT = r"(?:not|n't|never)"
_AUX = r"(?:could|can|did|does|do|would|will|was|were|is|are|has|have|had|ca|wo)"
_PHRASES: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), r) for p, r in (
    (r"\b(ca|wo|do|does|did|is|are|was|were|has|have|had|could|would|should|must|need)n't\b", r"\1 not"),
    (r"\bcannot\b", "can not"),
    # nothing there: "could not find", "no such", "not found", "does not exist" …
    (r"\b(?:" + _AUX + r"\s+" + _NOT + r"\s+(?:be\s+)?|unable\s+to\s+|fail(?:ed|s)?\s+to\s+)"
     r"(?:find|found|locate[d]?|see|seen|detect(?:ed)?)\b", " none "),
    (r"\b(?:not\s+found|no\s+such|(?:does|do|did)\s+not\s+exist|not\s+exist(?:s|ing)?|non-?existent|"
     r"nowhere\s+to\s+be\s+found|not\s+present|not\s+available|unavailable)\b", " none "),
    (r"\b(?:timed?[\s-]*out|time[\s-]?outs?)\b", " timeout "),
    # an empty answer: "0 results", "no matches", "nothing matched", "did not match any …", "[]"
    (r"\b(?:no|zero|0|nil|empty)\s+(?:results?|matches|match|hits?|rows?|records?|items?|entries|documents?|"
     r"output|answers?|data|lines?)\b", " none result "),
    (r"\b(?:nothing|none)\s+(?:found|matched|matches|returned|came\s+back|to\s+show)\b", " none result "),
    (r"\b(?:" + _AUX + r"\s+" + _NOT + r"|fail(?:ed|s)?\s+to)\s+(?:match|return)(?:\s+(?:any|anything)\w*)?\b",
     " none result "),
    (r"\b(?:total|count|hits|matches|results|found|rows)\W{0,3}0\b(?![.,]\d)", " none result "),
    (r"^\W*(?:\[\s*\]|\{\s*\}|\(\s*\)|null|none|nil|empty|\(?(?:empty|none|no output|nothing)\)?)\W*$",
     " none result "),
    (r"\b(?:permission|access)\s+denied\b|\bforbidden\b|\bunauthori[sz]ed\b", " denied "),
    (r"\bout\s+of\s+memory\b|\boom\b", " oom "),
    (r"\b(?:" + _AUX + r"\s+" + _NOT + r"|unable\s+to|fail(?:ed|s|ing)?\s+to|" r"(?:did|does)\s+not\s+manage\s+to)\b",
     " fail "),
    (r"\b(?:try|tried|trying)\s+again\b|\bonce\s+more\b|\bone\s+more\s+time\b|\byet\s+again\b|\bover\s+again\b|"
     r"\bno\s+luck\b|\bnot\s+able\s+to\b", " "),
))

# ---------------------------------------------------------------------- words
_STOP = frozenset("""
a an the and or nor but so yet of to in on at by for with from into onto about as than up down out over under
off per via than then there here this that these those it its it's itself i me my mine we us our ours you your
he him his she her they them their what which who whom whose when where why how whether if else while during
until after before since because though although however therefore thus hence also too very just only even
really actually basically apparently unfortunately sadly still again another once more most much many some any
all both each every either neither such same other others own be been being is am are was were do does did done
doing have has had having will would shall should can could may might must let lets ok okay well hmm oh ah
now currently today anymore already soon later next previous last first second third new old
one two three four five six seven eight nine ten several few little lot lots bit
try tries tried trying retry retries retried retrying attempt attempts attempted attempting reattempt
keep keeps kept keeping continue continues continued continuing persist persists persisted persisting
seem seems seemed appear appears appeared look looks looked looking
get gets got gotten getting receive receives received return returns returned returning
say says said tell tells told report reports reported show shows showed shown showing give gives gave given
go goes went gone going come comes came make makes made making take takes took taken
find finds found finding locate located discover discovered spot spotted yield yields yielded produce produced
against along across around through within toward towards upon among amongst beside besides via onto per
able unable end ends ended ending unchanged luck lucky whatever apparently evidently clearly obviously
hit hits meet meets met face faces faced encounter encounters encountered happen happens happened
thing things something anything nothing everything stuff way time times step steps
like likely probably maybe perhaps possibly somehow instead anyway though
ca wo let's i'm i've i'll we're we've you're it'll that's there's here's
""".split())

# canonical concept ← surface forms (each stemmed when the table is built)
_SYNONYMS: dict[str, tuple[str, ...]] = {
    "fail": ("fail", "fails", "failed", "failing", "failure", "failures", "error", "errors", "errored", "err",
             "broke", "broken", "break", "breaks", "crash", "crashed", "crashes", "crashing", "exception",
             "exceptions", "unsuccessful", "problem", "problems", "fault", "faulty", "abort",
             "aborted", "panic", "panicked", "bad", "wrong", "invalid"),
    "missing": ("missing", "absent", "lacking", "lack", "lacks", "gone", "undefined", "unknown", "unresolved"),
    "none": ("none", "no", "zero", "nil", "null", "empty", "nobody", "nowhere"),
    "result": ("result", "results", "match", "matches", "matched", "hit", "hits", "finding", "findings",
               "output", "outputs", "answer", "answers", "response", "responses", "reply"),
    "search": ("search", "searched", "searching", "query", "queries", "queried", "lookup", "grep", "grepped",
               "seek", "sought", "hunt", "scan", "scanned", "scanning"),
    "refus": ("refuse", "refused", "refuses", "refusal", "reject", "rejected", "rejects", "rejection", "deny",
              "denies", "declined", "decline", "declines", "disallowed", "econnrefused"),
    "denied": ("denied", "permission", "permissions", "eacces", "eperm"),
    "dns": ("dns", "resolve", "resolved", "resolving", "resolution", "resolver", "nxdomain", "getaddrinfo"),
    "certificat": ("cert", "certs", "certificate", "certificates", "x509", "ssl", "tls"),
    "connect": ("connect", "connected", "connecting", "connection", "connections", "reach", "reached",
                "reachable", "unreachable", "contact", "handshake"),
    "database": ("database", "databases", "db", "dbs", "postgres", "postgresql", "mysql", "sqlite"),
    "repository": ("repo", "repos", "repository", "repositories"),
    "directory": ("dir", "dirs", "directory", "directories", "folder", "folders"),
    "file": ("file", "files", "document", "documents", "doc", "docs"),
    "config": ("config", "configs", "configuration", "configurations", "settings", "setting", "cfg", "conf"),
    "run": ("run", "runs", "ran", "running", "execute", "executed", "executing", "execution", "exec", "launch",
            "launched", "invoke", "invoked", "start", "started", "starting"),
    "build": ("build", "builds", "built", "building", "compile", "compiled", "compiling", "compilation"),
    "test": ("test", "tests", "tested", "testing", "spec", "specs", "suite"),
    "open": ("open", "opened", "opening", "read", "reads", "reading", "load", "loaded", "loading"),
    "write": ("write", "writes", "wrote", "written", "writing", "save", "saved", "saving", "store", "stored"),
    "change": ("change", "changed", "changes", "modify", "modified", "edit", "edited", "edits", "patch",
               "patched", "patching", "update", "updated", "alter", "altered", "tweak", "tweaked", "adjust",
               "adjusted"),
    "delete": ("delete", "deleted", "remove", "removed", "drop", "dropped", "erase", "erased"),
    "create": ("create", "created", "generate", "generated", "add", "added", "new"),
    "install": ("install", "installed", "installing", "installation", "setup"),
    "fix": ("fix", "fixed", "fixing", "fixes", "repair", "repaired", "solve", "solved"),
    "check": ("check", "checked", "checking", "verify", "verified", "verifying", "validate", "validated",
              "inspect", "inspected", "examine", "examined", "review", "reviewed"),
    "wait": ("wait", "waited", "waiting", "pending", "hang", "hangs", "hung", "stuck", "stall", "stalled",
             "blocked", "block"),
    "slow": ("slow", "slowly", "sluggish", "lag", "lagging", "latency"),
    "big": ("big", "large", "huge", "oversized", "exceed", "exceeded", "exceeds", "limit", "limits"),
    "server": ("server", "servers", "host", "hosts", "service", "services", "backend", "endpoint", "endpoints",
               "api"),
    "request": ("request", "requests", "call", "calls", "called", "calling", "fetch", "fetched", "fetching"),
    "timeout": ("timeout", "timeouts", "deadline"),
    "succeed": ("succeed", "succeeded", "success", "successful", "successfully", "pass", "passed", "passes",
                "passing", "ok", "green", "works", "worked"),
    "dependency": ("dependency", "dependencies", "package", "packages", "module", "modules", "library",
                   "libraries", "lib", "libs", "import", "imports", "imported"),
    "credential": ("credential", "credentials", "token", "tokens", "password", "key", "keys", "auth",
                   "authentication", "authenticate", "authenticating", "authenticated", "login", "secret"),
}

# Concepts so general that saying one for the first time is not news by itself (a failure that says
# "failed" in its third wording): they count in overlaps, never as a new word.
WEAK = frozenset({"fail", "none", "result", "succeed", "run", "request", "wait", "check", "change", "create",
                  "open", "write", "search", "server", "file", "not", "timeout"})
_SPECIFIC = re.compile(r"[\d_./\\:@#\ue000-\ue009]")
_TOKEN = re.compile(r"<[a-z]+>|[\w\ue000-\ue009]+(?:[-./\\:@#'][\w\ue000-\ue009]+)*")


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A small suffix stripper (not Porter's, consistent with itself): refused, refusing, refuse →
    ``refus``; connection, connections → ``connect``; queries → ``query``."""
    w = word
    if len(w) <= 3:
        return w
    for suffix, repl in (("ational", "ate"), ("ations", ""), ("ation", ""), ("itions", ""), ("ition", ""),
                         ("ments", ""), ("ment", ""), ("nesses", ""), ("ness", ""), ("ions", ""), ("ion", ""),
                         ("ings", ""), ("ing", ""), ("ies", "y"), ("ied", "y"), ("ures", ""), ("ure", ""),
                         ("edly", ""), ("ly", ""), ("ed", ""), ("es", ""), ("s", "")):
        if w.endswith(suffix) and len(w) - len(suffix) + len(repl) >= 3:
            if suffix == "s" and (w.endswith("ss") or w.endswith("us") or w.endswith("is")):
                continue
            if suffix == "es" and not re.search(r"(?:sh|ch|ss|x|z|o)es$", w):
                w = w[:-1]  # "refuses" → "refuse" (then the final e below)
                break
            w = w[: len(w) - len(suffix)] + repl
            break
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "lsz":
        w = w[:-1]  # running → runn → run
    return w


def _canonical_table() -> dict[str, str]:
    out: dict[str, str] = {}
    for canon, forms in _SYNONYMS.items():
        for f in forms + (canon,):
            out.setdefault(f, canon)
            out.setdefault(stem(f), canon)
    return out


_CANON = _canonical_table()
_STOP_STEMS = frozenset(stem(w) for w in _STOP) | _STOP


def is_specific(token: str) -> bool:
    """A name of a thing (``test_login``, ``src/app.py``, ``v2``), kept whole and never a synonym."""
    return bool(_SPECIFIC.search(token))


@functools.lru_cache(maxsize=65536)
def word_concept(token: str) -> str | None:
    """One token → its concept (None: a stop word or a placeholder)."""
    if token.startswith("<"):
        return None
    if is_specific(token):
        return token.strip("'")
    if token in _STOP:
        return None
    if token in _CANON:
        return _CANON[token]
    s = stem(token)
    if s in _STOP_STEMS:
        return None
    return _CANON.get(s, s)


MAX_CONCEPTS = 24  # concepts kept of one line (the first ones): the memory a line adds is bounded


def concepts(normalised_line: str, drop: Iterable[str] = ()) -> frozenset[str]:
    """The concepts of a normalised line (``novelty.normalise_line``), less those in ``drop``; at
    most ``MAX_CONCEPTS`` (the first)."""
    s = normalised_line
    for pattern, repl in _PHRASES:
        s = pattern.sub(repl, s)
    dropped = set(drop)
    out: dict[str, None] = {}
    for t in _TOKEN.findall(s):
        c = word_concept(t)
        if c and c not in dropped:
            out[c] = None
            if len(out) >= MAX_CONCEPTS:
                break
    return frozenset(out)


__all__ = ["MAX_CONCEPTS", "WEAK", "concepts", "is_specific", "stem", "word_concept"]
