"""Word pools the families draw names, identifiers and facts from.

Fresh names come from :class:`Names`, which never hands out the same one twice in a trial, so a
healthy family's new file, test or fact really is new, while a loop repeats what it already drew.
"""

from __future__ import annotations

import random

VERBS = ("parse", "load", "fetch", "build", "render", "resolve", "merge", "split", "encode", "decode",
         "validate", "normalize", "sync", "flush", "retry", "schedule", "dispatch", "compile", "index",
         "hydrate", "serialize", "migrate", "export", "import", "compute", "route", "cache", "refresh",
         "publish", "subscribe", "verify", "sign", "upload", "download", "archive", "prune", "format",
         "scan", "rank", "score", "match", "apply", "revert", "wrap", "unwrap", "emit", "collect")
NOUNS = ("config", "session", "user", "order", "invoice", "token", "header", "payload", "record", "batch",
         "cursor", "schema", "manifest", "widget", "layout", "theme", "route", "handler", "client",
         "server", "queue", "worker", "job", "ledger", "account", "profile", "avatar", "comment", "thread",
         "message", "channel", "webhook", "event", "metric", "report", "chart", "table", "column", "query",
         "filter", "sorter", "plugin", "bundle", "asset", "locale", "timezone", "currency", "payment",
         "refund", "coupon", "cart", "product", "catalog", "shipment", "address", "tenant", "permission",
         "role", "policy", "secret", "certificate", "snapshot", "backup", "replica", "shard", "partition")
ADJECTIVES = ("empty", "nested", "missing", "stale", "duplicate", "unicode", "large", "concurrent",
              "expired", "malformed", "partial", "legacy", "default", "optional", "negative", "zero",
              "trailing", "leading", "mixed", "unsorted", "cyclic", "orphaned", "encrypted", "compressed")
PROJECTS = ("atlas", "beacon", "cobalt", "dover", "ember", "fable", "garnet", "harbor", "iris", "juniper",
            "kestrel", "lumen", "marlin", "nimbus", "onyx", "pylon", "quartz", "rook", "sable", "tundra",
            "umber", "vesper", "willow", "xenon", "yarrow", "zephyr", "anvil", "bramble", "cinder", "delta")
DIRS = ("src", "lib", "app", "internal", "pkg", "core", "server", "web", "api", "services", "utils")
SUBDIRS = ("auth", "billing", "search", "storage", "ui", "jobs", "models", "views", "handlers", "adapters",
           "cli", "reports", "sync", "admin", "metrics", "mail", "export", "io", "net", "db")
PEOPLE = ("Ana Ruiz", "Ben Okafor", "Chen Wei", "Dara Novak", "Elif Kaya", "Farid Haddad", "Greta Lind",
          "Hiro Sato", "Ines Duarte", "Jonas Berg", "Kavya Rao", "Liam Walsh", "Mira Kovac", "Nils Dahl",
          "Oona Virtanen", "Pavel Sokol", "Qiu Lan", "Rosa Mendes", "Sami Aziz", "Tara Singh")
CITIES = ("Lisbon", "Oslo", "Nairobi", "Osaka", "Lima", "Tallinn", "Accra", "Porto", "Leeds", "Hanoi",
          "Quito", "Gdansk", "Cork", "Pune", "Dakar", "Graz", "Perth", "Tucson", "Malmo", "Cebu",
          "Bergen", "Kochi", "Lyon", "Recife", "Ghent", "Kazan", "Tartu", "Split", "Bilbao", "Mysore")
ORGS = ("Northwind Labs", "Helix Health", "Corvid Systems", "Bluefin Energy", "Tamarack Bank",
        "Quill Media", "Ostrava Steel", "Meridian Rail", "Kelp Foods", "Sundial Insurance", "Arbor Logistics",
        "Pinecone Retail", "Lattice Pharma", "Granite Mutual", "Ferro Motors", "Aurora Telecom")
TOPICS = {
    "battery": ("solid-state electrolyte", "lithium iron phosphate cell", "sodium-ion cathode", "dendrite growth",
                "cycle life", "thermal runaway", "anode coating", "fast-charge protocol", "separator film",
                "energy density", "cobalt-free chemistry", "recycling yield"),
    "health": ("nurse staffing ratio", "readmission rate", "triage protocol", "telehealth visit",
               "sepsis screening", "discharge planning", "medication error", "bed occupancy",
               "wait time", "patient satisfaction score", "infection control audit", "rural clinic"),
    "transit": ("bus rapid transit line", "fare capping", "ridership", "headway", "on-time performance",
                "park-and-ride lot", "congestion charge", "bike-share dock", "night service",
                "low-floor tram", "transfer penalty", "station accessibility"),
    "farming": ("cover crop", "drip irrigation", "soil organic carbon", "nitrogen runoff", "yield gap",
                "no-till field", "pollinator strip", "grain moisture", "pest pressure", "crop rotation",
                "seed variety trial", "fertiliser rate"),
    "security": ("phishing simulation", "MFA enrolment", "patch latency", "privileged account", "EDR alert",
                 "incident response drill", "password reuse", "supply-chain attack", "SBOM coverage",
                 "ransomware dwell time", "zero-trust rollout", "vulnerability backlog"),
}
RELATIONS = ("reduced", "increased", "doubled", "halved", "did not change", "predicted", "explained",
             "lowered", "raised", "was associated with", "outperformed", "lagged behind")
SOURCES = ("a 2019 survey", "the 2021 annual report", "a randomised trial", "a regional audit",
           "an industry white paper", "a government statistics release", "a meta-analysis",
           "a field study", "a conference keynote", "an internal memo", "a trade-press article",
           "a university working paper", "a regulator's consultation", "a vendor benchmark")
TLDS = ("com", "org", "io", "net", "dev", "co.uk", "de", "ai")
PACKAGES_NPM = ("react", "react-dom", "vite", "typescript", "eslint", "zod", "axios", "lodash", "date-fns",
                "express", "jest", "vitest", "prettier", "webpack", "next", "tailwindcss", "rollup", "esbuild")
PACKAGES_PY = ("requests", "numpy", "pandas", "pydantic", "sqlalchemy", "fastapi", "httpx", "attrs",
               "click", "rich", "pytest", "boto3", "jinja2", "celery", "redis", "uvicorn", "orjson")
CRATES = ("serde", "tokio", "anyhow", "clap", "regex", "reqwest", "hyper", "tracing", "rand", "chrono",
          "thiserror", "futures", "bytes", "itertools", "once_cell", "parking_lot")


class Names:
    """Fresh names for one trial: nothing is handed out twice."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def _fresh(self, make) -> str:  # type: ignore[no-untyped-def]
        for _ in range(200):
            s = make()
            if s not in self.used:
                self.used.add(s)
                return s
        s = f"{make()}{len(self.used)}"
        self.used.add(s)
        return s

    def ident(self, sep: str = "_") -> str:
        r = self.rng
        return self._fresh(lambda: f"{r.choice(VERBS)}{sep}{r.choice(NOUNS)}")

    def camel(self) -> str:
        r = self.rng
        return self._fresh(lambda: r.choice(VERBS) + r.choice(NOUNS).capitalize())

    def type_name(self) -> str:
        r = self.rng
        return self._fresh(lambda: r.choice(NOUNS).capitalize() + r.choice(("", "Service", "Store", "View",
                                                                              "Client", "Options", "Record")))

    def test(self) -> str:
        r = self.rng
        return self._fresh(lambda: f"test_{r.choice(VERBS)}_{r.choice(ADJECTIVES)}_{r.choice(NOUNS)}")

    def module(self, ext: str = "py", root: str | None = None) -> str:
        r = self.rng
        return self._fresh(lambda: f"{root or r.choice(DIRS)}/{r.choice(SUBDIRS)}/{r.choice(NOUNS)}"
                                   f"{r.choice(('', '_' + r.choice(NOUNS)))}.{ext}")

    def host(self) -> str:
        r = self.rng
        return self._fresh(lambda: f"{r.choice(('www.', 'docs.', 'blog.', '', 'news.'))}{r.choice(PROJECTS)}"
                                   f"{r.choice(NOUNS)}.{r.choice(TLDS)}")

    def slug(self) -> str:
        r = self.rng
        return self._fresh(lambda: "-".join(r.sample(VERBS + NOUNS + ADJECTIVES, r.randint(2, 5))))

    def person(self) -> str:
        return self._fresh(lambda: self.rng.choice(PEOPLE))

    def pick(self, pool: tuple[str, ...]) -> str:
        """A member of ``pool`` not drawn before (any member once the pool is used up)."""
        left = [p for p in pool if p not in self.used]
        s = self.rng.choice(left or list(pool))
        self.used.add(s)
        return s


def fact(rng: random.Random, names: Names, topic: str) -> tuple[str, str, str, str]:
    """A new (subject, relation, object, source) fact about ``topic``."""
    terms = TOPICS[topic]
    while True:
        subj, obj = rng.sample(terms, 2)
        where = names.pick(CITIES + ORGS)
        key = f"{subj}|{obj}|{where}"
        if key not in names.used:
            names.used.add(key)
            return (f"the {subj} in {where}", rng.choice(RELATIONS), f"the {obj}", rng.choice(SOURCES))


def say_fact(rng: random.Random, f: tuple[str, str, str, str], pct: int) -> str:
    """One way of writing a fact down (the same fact, worded differently on each call)."""
    subj, rel, obj, src = f
    return rng.choice((
        f"According to {src}, {subj} {rel} {obj} (by about {pct}%).",
        f"{src.capitalize()} reports that {subj} {rel} {obj}, roughly {pct} percent.",
        f"Per {src}: {subj} {rel} {obj} — effect size ~{pct}%.",
        f"{subj[0].upper() + subj[1:]} {rel} {obj} by {pct}% ({src}).",
        f"Finding ({src}): {obj} — {subj} {rel} it, {pct}% change.",
        f"Noted: {subj} {rel} {obj}; {src} puts the change near {pct}%.",
    ))
