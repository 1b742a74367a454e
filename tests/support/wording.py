"""Vocabulary for the report generators (tests/support/reports.py): things an agent works on, ways
it fails, ways it says it failed, searches and their empty answers, healthy narratives.

Written from descriptions of how agents loop, not from the detector's word lists: the templates use
fillers, word orders and tenses the detector was not told about, so what it catches here it
catches by its rules (stemming, synonyms, stop words, overlap), not by a shared list. Two template
banks: ``BANK_A`` for working on the detector, ``BANK_B`` held back for the figures.
"""

from __future__ import annotations

import random

TARGETS = [
    # (noun phrase, a short name used in other phrasings)
    ("the billing database", "billing db"), ("the payments API", "payments service"),
    ("the Redis cache", "redis"), ("the artifact registry", "registry"), ("the staging cluster", "staging"),
    ("the auth server", "auth service"), ("the S3 bucket acme-exports", "acme-exports bucket"),
    ("the search index", "index"), ("the license server", "licensing host"), ("the build cache", "cache"),
    ("the SMTP relay", "mail relay"), ("the feature-flag service", "flags service"),
]
OPS = [
    # (verb, -ing form, noun)
    ("connect to", "connecting to", "connection to"), ("reach", "reaching", "request to"),
    ("authenticate against", "authenticating against", "login to"), ("upload the report to", "uploading the report to",
                                                                      "upload to"),
    ("query", "querying", "query against"), ("sync with", "syncing with", "sync with"),
]
ERRORS = [
    # several ways to say one failure; a trial keeps one failure and picks among its wordings
    ["connection refused", "the connection was refused", "ECONNREFUSED (connection refused)",
     "refused the connection"],
    ["timed out", "a timeout", "timeout after waiting", "the request timed out"],
    ["permission denied", "access denied", "a permission error (denied)", "403 forbidden"],
    ["TLS handshake failure", "a failed TLS handshake", "handshake error (TLS)", "TLS handshake failed"],
    ["certificate expired", "an expired certificate", "the certificate has expired", "cert expired"],
    ["DNS lookup failure", "could not resolve the host", "name resolution failed", "DNS resolution error"],
    ["quota exceeded", "the quota was exceeded", "over quota", "quota limit exceeded"],
    ["invalid credentials", "bad credentials", "credentials rejected", "the credentials are invalid"],
]

BANK_A = [
    "{Ving} {target} failed: {err}",
    "Tried to {v} {target} but got {err}",
    "{Err} while trying to {v} {target}",
    "Could not {v} {target} ({err})",
    "Still unable to {v} {target}: {err} again",
    "Attempt to {v} {target} ended with {err}",
    "Retrying: {v} {target} -> {err}",
    "Same problem with {short}: {err}",
    "{Noun} {target} failed with {err}",
    "Again {err} when {ving} {target}",
    "I was not able to {v} {target} because of {err}",
    "{short}: {err}, will try again",
]
BANK_B = [
    "No luck with {short} - {err} once more",
    "{Err}. {V} {target} did not work.",
    "Another try to {v} {target}; result: {err}",
    "{Target} still gives {err} when I {v} it",
    "Hit {err} again on {short}",
    "{Ving} {target}: {err} (unchanged)",
    "It seems {target} is failing with {err}",
    "Yet another {err} from {short}",
    "Once again {v} {target} returned {err}",
    "{Err} - {v} {target} failed one more time",
    "Unfortunately {ving} {target} gave {err} again",
    "Failed to {v} {target}: {err}",
]


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def reworded_failure(rng: random.Random, bank: list[str]):
    """An endless stream of one failure told in other words each time (no two in a row alike)."""
    target, short = rng.choice(TARGETS)
    v, ving, noun = rng.choice(OPS)
    errs = rng.choice(ERRORS)
    last = None
    while True:
        tpl = rng.choice([t for t in bank if t != last])
        last = tpl
        err = rng.choice(errs)
        yield tpl.format(v=v, V=_cap(v), ving=ving, Ving=_cap(ving), noun=noun, Noun=_cap(noun), target=target,
                         Target=_cap(target), short=short, err=err, Err=_cap(err))


# ---------------------------------------------------------------------- searches
SUBJECTS = [
    ["moth index", "moth catalogue v2", "lepidoptera index", "index of moths", "moth species list",
     "moths by region", "night-flying moth catalog"],
    ["refund policy 2019", "old refund rules", "refund terms archive", "legacy refund policy",
     "refunds before 2020", "historic refund conditions"],
    ["parseLegacyDate", "parse_legacy_date", "legacyDateParser", "LegacyDate.parse", "legacy date parsing",
     "parse legacy dates"],
    ["customer churn dataset", "churn data csv", "customer attrition data", "churn table", "attrition dataset"],
    ["OAuth device flow example", "device authorization grant sample", "oauth device code flow",
     "device flow oauth2 demo"],
]
TOOLS = [
    "search({q!r})", "web_search(query={q!r})", "grep -rn {q!r} src/", "search_docs(q={q!r}, limit=10)",
    "kb.lookup({q!r})", "find . -iname '*{q}*'", "SELECT id FROM docs WHERE title ILIKE '%{q}%'",
]
EMPTY = [
    "0 results", "No results found.", "0 matches", "[]", "(no output)", "Found 0 results",
    "{{\"hits\": [], \"total\": 0}}", "nothing matched", "no matches", "Your search did not match any documents.",
]
EMPTY_ECHO = [
    "No results for {q!r}.", "0 results for {q!r}", "Your search - {q} - did not match any documents.",
    "grep: no match for {q!r}", "Nothing found for {q!r}",
]


def searches(rng: random.Random):
    """(action, query) pairs for one subject, each query worded differently (then again)."""
    queries = list(rng.choice(SUBJECTS))
    rng.shuffle(queries)
    tools = rng.sample(TOOLS, rng.randint(1, 3))
    i = 0
    while True:
        q = queries[i % len(queries)] + ("" if i < len(queries) else f" {rng.choice(['docs', 'v3', 'faq', 'old'])}")
        yield rng.choice(tools).format(q=q), q
        i += 1


FOUND_FILES = ["src/{a}/{b}.py", "docs/{a}/{b}.md", "lib/{a}_{b}.ts", "tests/test_{a}_{b}.py", "pkg/{a}/{b}.go"]


def name(rng: random.Random) -> str:
    return rng.choice(["order", "refund", "ledger", "invoice", "tax", "audit", "export", "report", "billing",
                       "session", "token", "cache", "queue", "worker", "retry", "policy", "schema", "index",
                       "moth", "species", "region", "catalog", "parser", "date", "legacy", "customer", "churn"]) + \
        rng.choice(["", "s", "_v2", "_util", "_core", "_io", "_api", "_model", "_view", "_job"])


def found(rng: random.Random) -> str:
    """A search result that brings something: a few hits with their places and snippets."""
    n = rng.randint(1, 4)
    head = rng.choice(["{n} results", "Found {n} matches", "{n} hits:", "results ({n}):", ""]).format(n=n)
    hits = []
    for _ in range(n):
        path = rng.choice(FOUND_FILES).format(a=name(rng), b=name(rng))
        hits.append(rng.choice([f"{path}:{rng.randint(1, 900)}: def {name(rng)}_{name(rng)}(",
                                f"{path} - {name(rng)} {name(rng)} handling",
                                f"- {path} (score {rng.random():.2f})"]))
    return "\n".join(([head] if head else []) + hits)


# ---------------------------------------------------------------------- healthy narratives
FILES = ["src/billing/invoice.py", "src/billing/tax.py", "src/api/routes.py", "src/api/auth.py", "lib/cache.ts",
         "docs/architecture.md", "tests/test_refunds.py", "migrations/0042_add_index.sql", "src/core/ledger.py",
         "config/settings.yaml", "src/workers/export.py", "README.md", "src/models/customer.py"]
CONCEPTS = ["currency rounding", "retry back-off", "session expiry", "the refund workflow", "pagination",
            "timezone handling", "the export format", "rate limiting", "audit logging", "invoice numbering",
            "the cache key scheme", "schema migrations", "error reporting", "CSV quoting", "the login flow"]
CHANGES = ["use Decimal instead of float", "handle an empty list", "close the file handle", "add a timeout",
           "log the request id", "drop the unused import", "rename the helper", "split the long function",
           "guard against None", "use UTC everywhere", "batch the inserts", "escape the HTML"]
NARRATIVE = [
    "Reading {file} to understand {concept}",
    "Found where {concept} is handled: {func}() in {file}:{line}",
    "Changed {func} in {file} to {change}",
    "Ran the tests for {file}: {n} passed",
    "Next I'll look at {concept} in {file}",
    "{concept} looks fine in {file}; moving on",
    "Wrote a regression test for {concept} ({test})",
    "Opened a draft note on {concept}",
    "Compared {file} with {file2}: {concept} differs",
    "Refactored {func} ({change})",
]


def func(rng: random.Random) -> str:
    return f"{rng.choice(['parse', 'load', 'save', 'apply', 'compute', 'render', 'validate', 'fetch', 'emit'])}_" \
           f"{rng.choice(['invoice', 'refund', 'row', 'total', 'header', 'token', 'rate', 'batch', 'page'])}"


def narrative(rng: random.Random) -> str:
    return rng.choice(NARRATIVE).format(
        file=rng.choice(FILES), file2=rng.choice(FILES), concept=rng.choice(CONCEPTS), change=rng.choice(CHANGES),
        func=func(rng), line=rng.randint(5, 900), n=rng.randint(2, 80), test=f"test_{func(rng)}")
