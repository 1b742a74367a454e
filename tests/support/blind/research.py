"""Research agents: searching, reading documents that overlap, taking notes (and going round in circles)."""

from __future__ import annotations

import random

from ..stalls import Script
from . import noise, phrases
from .trace import Trial, healthy, looping, pick
from .words import CITIES, ORGS, PEOPLE, TOPICS, fact, say_fact

FILLER = ("Over the past decade, {a} has moved from a niche concern to a mainstream priority for planners.",
          "Most observers agree that {a} and {b} are closely linked, although the direction of the effect is debated.",
          "Critics argue that headline figures on {a} hide large differences between regions.",
          "The evidence base on {b} is uneven: many studies are small, short, or funded by interested parties.",
          "Practitioners often describe {a} as a question of capacity rather than of technology.",
          "Historically, investment in {b} followed rather than led changes in {a}.",
          "Definitions vary, which makes comparisons of {a} across countries difficult.",
          "Several reviews call for better data on {b}, particularly longitudinal data.",
          "In policy debates, {a} tends to be framed as a cost, while {b} is framed as an opportunity.",
          "This section summarises the background; readers familiar with {a} may skip ahead.",
          "Case studies suggest that local conditions matter more for {b} than national rules.",
          "The relationship between {a} and {b} is the subject of ongoing research.")
CHROME = ("Skip to main content", "Accept all cookies", "Subscribe to our newsletter", "Share this article",
          "Related articles", "© {year} {org}. All rights reserved.", "Sign in", "Menu", "Search", "Advertisement")


def paragraphs(rng: random.Random, topic: str, n: int) -> list[str]:
    """Familiar background: paragraphs any source on ``topic`` repeats."""
    terms = TOPICS[topic]
    out = []
    for _ in range(n):
        k = rng.randint(3, 5)
        out.append(" ".join(rng.choice(FILLER).format(a=rng.choice(terms), b=rng.choice(terms)) for _ in range(k)))
    return out


def results(t: Trial, items: list[tuple[str, str, str]], fmt: int) -> str:
    """Search results (title, url, snippet) in one of the shapes search tools return."""
    rng = t.rng
    if fmt == 0:
        return "\n".join(f"{i + 1}. {ti}\n   {u}\n   {sn}" for i, (ti, u, sn) in enumerate(items))
    if fmt == 1:
        return "[" + ", ".join(f'{{"title": "{ti}", "url": "{u}", "snippet": "{sn}"}}' for ti, u, sn in items) + "]"
    if fmt == 2:
        return "\n\n".join(f"## {ti}\n{u}\n{pick(rng, '2 days ago', '3 weeks ago', 'Mar 2023', '1 year ago')} — {sn}" for ti, u, sn in items)
    return f"Found {len(items)} results:\n" + "\n".join(f"- [{ti}]({u}): {sn}" for ti, u, sn in items)


def new_result(t: Trial, topic: str) -> tuple[str, str, str]:
    rng, names = t.rng, t.names
    term = rng.choice(TOPICS[topic])
    title = pick(rng, f"How {term} changed in {rng.choice(ORGS)}", f"The {term} report {rng.randint(2015, 2025)}",
                 f"What we learned about {term}", f"{term.title()}: a review", f"Why {term} matters for {rng.choice(TOPICS[topic])}")
    url = f"https://{names.host()}/{names.slug()}"
    return (title, url, f"{rng.choice(FILLER).format(a=term, b=rng.choice(TOPICS[topic]))[:120]}…")


def page(t: Trial, body: list[str], chrome: bool) -> str:
    rng = t.rng
    if not chrome:
        return "\n\n".join(body)
    top = [c.format(year=2024, org="Publisher") for c in CHROME[:4]]
    bottom = [c.format(year=rng.choice((2023, 2024)), org=rng.choice(ORGS)) for c in CHROME[4:6]]
    return "\n".join(top) + "\n\n" + "\n\n".join(body) + "\n\n" + "\n".join(bottom)


def _setup(rng: random.Random) -> tuple[Trial, str, int]:
    t = Trial(rng)
    return t, rng.choice(sorted(TOPICS)), rng.randrange(4)


@healthy
def search_read_notes(rng: random.Random, actions: bool) -> Script:
    """Search a sub-question, read a result or two, write down what was found; next sub-question."""
    t, topic, fmt = _setup(rng)
    for _ in range(rng.randint(5, 10)):
        q = f"{rng.choice(TOPICS[topic])} {pick(rng, 'evidence', 'statistics', 'case study', 'cost', '2023', 'review')}"
        items = [new_result(t, topic) for _ in range(rng.randint(3, 8))]
        t.emit(q, results(t, items, fmt), tool="web_search")
        for ti, u, _ in rng.sample(items, rng.randint(1, 2)):
            body = paragraphs(rng, topic, 1) + [say_fact(rng, fact(rng, t.names, topic), rng.randint(3, 60))
                                                for _ in range(rng.randint(1, 3))]
            t.emit(u, page(t, [f"# {ti}"] + body, rng.random() < 0.5), tool="web_fetch")
        f = fact(rng, t.names, topic)
        t.emit(None, f"Note: {say_fact(rng, f, rng.randint(3, 60))}")
    return t.script(actions)


@healthy
def overlapping_documents(rng: random.Random, actions: bool) -> Script:
    """Documents that mostly repeat the same background paragraphs, each adding a few new facts."""
    t, topic, fmt = _setup(rng)
    pool = paragraphs(rng, topic, rng.randint(6, 12))
    chrome = rng.random() < 0.5
    for i in range(rng.randint(10, 22)):
        url = f"https://{t.names.host()}/{t.names.slug()}"
        body = rng.sample(pool, rng.randint(3, min(6, len(pool))))
        new = [say_fact(rng, fact(rng, t.names, topic), rng.randint(2, 70)) for _ in range(rng.randint(1, 3))]
        for s in new:
            body.insert(rng.randrange(len(body) + 1), s)
        t.emit(url, page(t, body, chrome), tool="web_fetch")
        if rng.random() < 0.4:
            t.emit(None, pick(rng, "New in this source: ", "Adds: ", "Notes (new): ") + " ".join(new))
    return t.script(actions)


@healthy
def literature_review(rng: random.Random, actions: bool) -> Script:
    """Query a paper index, read abstracts of papers not seen before, log each into the review table."""
    t, topic, fmt = _setup(rng)
    n = 0
    for _ in range(rng.randint(4, 8)):
        term = rng.choice(TOPICS[topic])
        papers = [(f"{pick(rng, 'On', 'Towards', 'Revisiting', 'A study of', 'Measuring')} {term} in {t.names.pick(ORGS)}",
                   rng.choice(PEOPLE).split()[-1], rng.randint(2012, 2025), rng.randint(0, 900)) for _ in range(rng.randint(3, 6))]
        out = "\n".join(f"[{noise.hexid(rng, 8)}] {ti} — {au} et al. ({y}), cited by {c}" for ti, au, y, c in papers)
        t.emit(f'search_papers(query="{term}", year=">{rng.randint(2010, 2020)}")', out, tool="scholar")
        for ti, au, y, _ in papers[: rng.randint(1, 3)]:
            f = fact(rng, t.names, topic)
            t.emit(f"get_abstract({ti!r})", f"{ti}\n{au} et al., {y}\n\nAbstract: {paragraphs(rng, topic, 1)[0]} "
                   f"{say_fact(rng, f, rng.randint(2, 60))}", tool="scholar")
            n += 1
            t.emit(None, f"Logged #{n}: {au} {y} — {f[0]} {f[1]} {f[2]}")
    return t.script(actions)


@healthy
def citation_chase(rng: random.Random, actions: bool) -> Script:
    """Follow reference lists: each list overlaps with what was seen, and brings some new papers."""
    t, topic, fmt = _setup(rng)
    seen: list[str] = []
    for _ in range(rng.randint(8, 16)):
        old = rng.sample(seen, min(len(seen), rng.randint(1, 5)))
        new = [f"{rng.choice(PEOPLE).split()[-1]} ({rng.randint(1998, 2024)}). {rng.choice(TOPICS[topic]).capitalize()} and "
               f"{rng.choice(TOPICS[topic])}: evidence from {t.names.pick(ORGS)}." for _ in range(rng.randint(1, 4))]
        refs = old + new
        rng.shuffle(refs)
        src = rng.choice(seen + new)
        t.emit(f"references of {src[:60]!r}", "\n".join(f"[{i + 1}] {r}" for i, r in enumerate(refs)), tool="scholar")
        seen += new
        t.emit(None, pick(rng, f"{len(new)} new of {len(refs)} references", f"queue: +{len(new)} (total {len(seen)})",
                          f"{len(refs) - len(new)} already seen; adding {', '.join(r.split('.')[0] for r in new)}"))
    return t.script(actions)


@healthy
def product_comparison(rng: random.Random, actions: bool) -> Script:
    """Read each vendor's spec page and fill the comparison matrix, cell by cell."""
    t, topic, fmt = _setup(rng)
    products = [f"{t.names.pick(ORGS).split()[0]} {pick(rng, 'Pro', 'X', 'Cloud', 'One', 'Edge', 'Max')} {rng.randint(2, 9)}"
                for _ in range(rng.randint(4, 8))]
    kinds = {"price/month": lambda: f"${rng.randint(5, 900)}", "seats": lambda: pick(rng, str(rng.randint(1, 500)), "unlimited"),
             "SLA": lambda: f"{rng.choice((99.5, 99.9, 99.95, 99.99))}%", "storage": lambda: f"{rng.randint(1, 500)} GB",
             "SSO": lambda: pick(rng, "yes", "no", "Enterprise only"), "regions": lambda: f"{rng.randint(1, 30)} regions",
             "API rate limit": lambda: f"{rng.randint(10, 5000)} req/min", "support": lambda: pick(rng, "24/7", "business hours", "email"),
             "retention": lambda: f"{rng.choice((7, 30, 90, 365))} days"}
    cols = rng.sample(sorted(kinds), 5)
    total, done = len(products) * len(cols), 0
    for p in products:
        vals = {c: kinds[c]() for c in cols}
        spec = "\n".join(f"| {c} | {v} |" for c, v in vals.items())
        t.emit(f"https://{t.names.host()}/pricing", f"# {p} — plans & pricing\n| feature | {p} |\n|---|---|\n{spec}", tool="web_fetch",
               units=(done, total))
        done += len(cols)
        t.emit(None, f"matrix: {p} filled ({', '.join(f'{c}={v}' for c, v in vals.items())})", units=(done, total))
    return t.script(actions)


@healthy
def long_document(rng: random.Random, actions: bool) -> Script:
    """Read a long report in page ranges; every page carries the same running header and footer."""
    t, topic, fmt = _setup(rng)
    org = rng.choice(ORGS)
    pages = rng.randint(120, 600)
    step = rng.choice((10, 15, 20, 25))
    header = f"{org} — {pick(rng, 'Annual Report', 'Sustainability Review', 'Technical Assessment')} {rng.randint(2019, 2024)}"
    p = 1
    while p < pages and len(t.beats) < 40:
        q = min(pages, p + step - 1)
        ch = f"{rng.randint(1, 12)}.{rng.randint(1, 9)} {rng.choice(TOPICS[topic]).title()} in {t.names.pick(ORGS + tuple(PEOPLE))}"
        body = [f"{header}    CONFIDENTIAL    Page {p}", ch] + [say_fact(rng, fact(rng, t.names, topic), rng.randint(2, 60))
                                                             for _ in range(rng.randint(1, 3))] + [f"{header}    Page {q} of {pages}"]
        t.emit(f"read_pdf(report.pdf, pages={p}-{q})", "\n".join(body), tool="pdf", units=(q, pages))
        if rng.random() < 0.3:
            t.emit(None, f"Summary so far (pp. {p}–{q}): {ch}")
        p = q + 1
    return t.script(actions)


@healthy
def interview_coding(rng: random.Random, actions: bool) -> Script:
    """Tag quotes of interview transcripts with themes, transcript by transcript."""
    t, topic, fmt = _setup(rng)
    themes = rng.sample(TOPICS[topic], 5)
    n = rng.randint(6, 14)
    for i in range(n):
        who = f"P{i + 1:02d}"
        quotes = [f"\"{pick(rng, 'Honestly', 'To be fair', 'The thing is', 'What bothers me is', 'I think')}, the "
                  f"{rng.choice(TOPICS[topic])} at {t.names.pick(ORGS + CITIES)} {rng.choice(('was', 'felt', 'became'))} "
                  f"{rng.choice(('a mess', 'much better', 'confusing', 'too slow', 'the main win', 'a surprise'))}.\""
                  for _ in range(rng.randint(2, 4))]
        t.emit(f"open transcripts/{who}.txt", "\n".join(f"{who}: {q}" for q in quotes), tool="read", units=(i, n))
        tags = ", ".join(f"{rng.choice(themes)}×{rng.randint(1, 3)}" for _ in range(rng.randint(1, 3)))
        t.emit(None, f"{who} coded: {tags}; memo: {quotes[0][:60]}…", units=(i + 1, n))
    return t.script(actions)


# ---------------------------------------------------------------------- loops
def _prefix(t: Trial, topic: str, fmt: int) -> None:
    rng = t.rng
    for _ in range(rng.randint(2, 6)):
        if rng.random() < 0.5:
            t.emit(f"{rng.choice(TOPICS[topic])} {pick(rng, 'data', 'study', 'trend')}",
                   results(t, [new_result(t, topic) for _ in range(rng.randint(3, 6))], fmt), tool="web_search")
        else:
            t.emit(f"https://{t.names.host()}/{t.names.slug()}", page(t, paragraphs(rng, topic, 1) +
                   [say_fact(rng, fact(rng, t.names, topic), rng.randint(2, 60))], rng.random() < 0.5), tool="web_fetch")


@looping
def reworded_queries(rng: random.Random, actions: bool) -> Script:
    """Ask the search engine the same question in new words; it returns the same pages."""
    t, topic, fmt = _setup(rng)
    _prefix(t, topic, fmt)
    a, b = rng.sample(TOPICS[topic], 2)
    items = [new_result(t, topic) for _ in range(rng.randint(4, 8))]
    shapes = (f"{a} effect on {b}", f"does {a} affect {b}", f"{b} {a} relationship", f"impact of {a} on {b} evidence",
              f"{a} and {b} study", f"how {a} changes {b}", f"{a} {b} correlation", f"{b} depends on {a}?",
              f"research {a} {b}", f"{a} vs {b} data")
    t.loop()
    for _ in range(5 + rng.randint(3, 10)):
        shown = items[:]
        if rng.random() < 0.5:  # the engine reorders neighbours a little
            i = rng.randrange(len(shown) - 1)
            shown[i], shown[i + 1] = shown[i + 1], shown[i]
        t.emit(rng.choice(shapes), results(t, shown, fmt), tool="web_search")
    return t.script(actions)


@looping
def rereading_same_pages(rng: random.Random, actions: bool) -> Script:
    """Open the same two or three pages over and over; only the fetch stamps and tracking ids change."""
    t, topic, fmt = _setup(rng)
    _prefix(t, topic, fmt)
    docs = [(f"https://{t.names.host()}/{t.names.slug()}", paragraphs(rng, topic, rng.randint(2, 4)))
            for _ in range(rng.randint(1, 3))]
    period = len(docs)
    t.loop(period)
    for _ in range(-(-(max(5, period + 2) + rng.randint(3, 10)) // period)):
        for url, body in docs:
            meta = pick(rng, f"Retrieved {t.ts()}", f"cache: MISS id={noise.hexid(rng, 16)}", f"fetched in {t.dur(rng.uniform(0.2, 3))}")
            t.emit(f"{url}?utm_source={pick(rng, 'x', 'news', 'rss')}&ref={noise.b62(rng, 8)}" if rng.random() < 0.4 else url,
                   f"{meta}\n\n" + "\n\n".join(body), tool="web_fetch")
    return t.script(actions)


@looping
def notes_restate(rng: random.Random, actions: bool) -> Script:
    """Re-read the same source and write the same three facts down again, in different words each time."""
    t, topic, fmt = _setup(rng)
    _prefix(t, topic, fmt)
    facts = [fact(rng, t.names, topic) for _ in range(rng.randint(1, 3))]
    pcts = [rng.randint(2, 60) for _ in facts]
    url = f"https://{t.names.host()}/{t.names.slug()}"
    body = paragraphs(rng, topic, 2) + [say_fact(rng, f, p) for f, p in zip(facts, pcts)]
    t.loop(2)
    for _ in range(-(-(5 + rng.randint(3, 10)) // 2)):
        t.emit(url, page(t, body, False), tool="web_fetch")
        t.emit(None, pick(rng, "Key points: ", "Notes: ", "Takeaways — ", "So far: ", "") +
               " ".join(say_fact(rng, f, p) for f, p in zip(facts, pcts)))
    return t.script(actions)


@looping
def paywalled_sources(rng: random.Random, actions: bool) -> Script:
    """Try one article URL after another of the same publisher; each answers with the same paywall."""
    t, topic, fmt = _setup(rng)
    _prefix(t, topic, fmt)
    host = t.names.host()
    wall = rng.choice((f"403 Forbidden\n\nSubscribe to {host} to continue reading. Already a subscriber? Sign in.",
                       "Access denied. This content is available to subscribers only.\nStart your free trial today.",
                       "Please enable JavaScript and cookies to continue.\nRay ID: {rid}"))
    t.loop()
    for _ in range(5 + rng.randint(3, 10)):
        t.emit(f"https://{host}/{rng.randint(2019, 2025)}/{rng.randint(1, 12):02d}/{t.names.slug()}",
               wall.replace("{rid}", noise.hexid(rng, 16)), tool="web_fetch",
               note=rng.choice((None, phrases.hunch(rng, "another article from the same site"))))
    return t.script(actions)

