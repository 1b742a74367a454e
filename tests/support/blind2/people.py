"""Work for and with people: CRM and e-mail assistants, localisation, document QA, game-playing agents,
and the loops of an agent talking to itself (or to a person who already answered)."""

from __future__ import annotations

import random

from ..stalls import Script
from .base import T2, healthy, loop_reports, looping, prefix, warmup

COMPANIES = ("Globex", "Initech", "Umbrella GmbH", "Stark Logistics", "Wayne Foods", "Soylent SA", "Tyrell KK", "Hooli",
             "Vandelay Import", "Acme Oy", "Cyberdyne BV", "Massive Dynamic", "Pied Piper", "Duff AG", "Oceanic SpA")
LOCALES = ("de-DE", "fr-FR", "ja-JP", "pt-BR", "es-MX", "it-IT", "nl-NL", "pl-PL", "ko-KR", "tr-TR", "sv-SE", "zh-Hans")


# ---------------------------------------------------------------------------------------------- healthy
@healthy
def crm_enrichment(rng: random.Random, actions: bool) -> Script:
    """A CRM assistant enriches leads one by one: lookup, then the fields it filled."""
    t = T2(rng)
    leads = t.rng.sample(COMPANIES, t.rng.randint(7, 13))
    for i, co in enumerate(leads):
        dom = co.split()[0].lower() + t.choose(".com", ".de", ".io", ".co.jp", ".fr")
        emp = t.rng.choice((12, 48, 230, 1_200, 8_400, 52_000))
        t.emit(f"clearbit.lookup(domain='{dom}')",
               f'{{"name": "{co}", "employees": {emp}, "industry": "{t.choose("Logistics", "Food", "Software", "Biotech", "Retail")}", '
               f'"city": "{t.choose("Lyon", "Osaka", "Austin", "Gdańsk", "Porto", "Utrecht")}", "raised": "{t.num(t.rng.uniform(1, 900), 1)}M"}}',
               tool="clearbit")
        t.emit(f"hubspot.contacts.update(id={t.rng.randint(10**5, 10**7)}, properties={{...}})",
               f"updated {t.rng.randint(3, 9)} properties of {t.choose('Anna', 'Kenji', 'Lucía', 'Tomasz', 'Priya', 'Jonas')} "
               f"{t.choose('Berg', 'Sato', 'Ruiz', 'Nowak', 'Iyer', 'Meyer')} ({co}); lifecycle → {t.choose('lead', 'MQL', 'SQL')}",
               tool="hubspot", units=(i + 1, len(leads)))
    return t.script(actions)


@healthy
def po_catalog_review(rng: random.Random, actions: bool) -> Script:
    """A localisation pipeline: extract strings, then per locale fix fuzzy entries until msgfmt counts clean."""
    t = T2(rng)
    total = t.rng.randint(300, 4000)
    t.emit("pybabel extract -F babel.cfg -o messages.pot .", f"extracting messages from {t.rng.randint(40, 400)} files\nwriting PO template file to messages.pot ({t.num(total)} messages)", tool="pybabel")
    for loc in t.rng.sample(LOCALES, t.rng.randint(4, 8)):
        done_, fuzzy = int(total * t.rng.uniform(0.6, 0.95)), t.rng.randint(5, 80)
        path = f"locale/{loc.replace('-', '_')}/LC_MESSAGES/messages.po"
        t.emit(f"msgfmt --statistics -c -o /dev/null {path}",
               f"{t.num(done_)} translated messages, {fuzzy} fuzzy translations, {t.num(total - done_ - fuzzy)} untranslated messages.", tool="msgfmt")
        for _ in range(t.rng.randint(1, 3)):
            if not fuzzy:
                break
            fixed = t.rng.randint(1, fuzzy)
            fuzzy -= fixed
            done_ += fixed
            msgid = t.choose("You have {count, plural, one {# item} other {# items}} in your cart",
                             "Your subscription renews on {date}", "Delete %(name)s?", "Payment failed: {reason}",
                             "Welcome back, {first_name}!", "Shipping to {country} takes {days} days")
            t.emit(f"po-edit {path} --fix-fuzzy --limit {fixed}",
                   f"{loc}: {fixed} fuzzy entries reviewed, e.g. msgid \"{msgid}\" — ICU plural forms checked ({t.rng.randint(1, 6)} categories)",
                   tool="po-edit")
        t.emit(f"msgfmt --statistics -c -o /dev/null {path}",
               f"{t.num(done_)} translated messages, {fuzzy} fuzzy translations, {t.num(max(0, total - done_ - fuzzy))} untranslated messages.", tool="msgfmt")
    return t.script(actions)


@healthy
def docqa_answering(rng: random.Random, actions: bool) -> Script:
    """Document QA: each question retrieves chunks (the same policy boilerplate around them) and gets an answer."""
    t = T2(rng)
    doc = t.choose("Employee Handbook 2024", "MSA with Globex (v7)", "SOC 2 Type II report", "Product Security Whitepaper")
    boiler = (f"{doc} — CONFIDENTIAL — do not distribute. This document is provided for information only and does not constitute "
              "legal advice. In case of conflict the signed agreement prevails.")
    qs = ("What is the notice period for termination?", "Who owns derived data?", "How long are backups retained?",
          "Is there a liability cap?", "What is the parental leave policy?", "Which sub-processors are listed?",
          "How are security incidents reported?", "What are the payment terms?", "Can the customer audit us?",
          "What is the uptime commitment?", "How is remote work expensed?", "What encryption is used at rest?")
    for q in t.rng.sample(qs, t.rng.randint(6, 11)):
        chunks = [f"[p.{t.rng.randint(1, 120)} §{t.rng.randint(1, 30)}.{t.rng.randint(1, 9)} score={t.rng.uniform(0.5, 0.95):.3f}] {boiler} "
                  f"{t.choose('The period is', 'Retention is', 'The cap equals', 'Leave amounts to', 'Terms are')} {t.rng.randint(2, 180)} "
                  f"{t.choose('days', 'months', 'percent of fees', 'weeks')} {t.choose('unless agreed otherwise', 'from the effective date', 'per incident', 'in aggregate')}."
                  for _ in range(t.rng.randint(2, 4))]
        t.emit(f"retrieve(query={q!r}, k={len(chunks)})", "\n".join(chunks), tool="retrieve")
        t.emit(None, f"Q: {q}\nA: {t.choose('Per', 'According to', 'See')} §{t.rng.randint(1, 30)}, {t.rng.randint(2, 180)} "
                     f"{t.choose('days', 'months', 'weeks')} ({t.choose('cited', 'quoted', 'with page refs')}).")
    return t.script(actions)


@healthy
def chess_engine_play(rng: random.Random, actions: bool) -> Script:
    """A game-playing agent: each move its own position, the engine's evaluation and best line."""
    t = T2(rng)
    files, ranks = "abcdefgh", "12345678"
    ev = 0.0
    moves = t.rng.randint(14, 32)
    for m in range(1, moves + 1):
        mv = f"{t.rng.choice(files)}{t.rng.choice(ranks)}{t.rng.choice(files)}{t.rng.choice(ranks)}"
        ev += t.rng.gauss(0, 0.4)
        pv = " ".join(f"{t.rng.choice(files)}{t.rng.choice(ranks)}{t.rng.choice(files)}{t.rng.choice(ranks)}" for _ in range(t.rng.randint(3, 8)))
        fen = "/".join("".join(t.rng.choice("pnbrqkPNBRQK12345678") for _ in range(t.rng.randint(3, 8))) for _ in range(8))
        t.emit(f"engine.play(move='{mv}')",
               t.choose(f"info depth {t.rng.randint(16, 30)} score cp {int(ev * 100)} nodes {t.num(t.rng.randint(10**5, 10**8))} pv {pv}\nbestmove {pv.split()[0]}",
                        f"Move {m}: {mv}. Eval {ev:+.2f}. Position {fen} w - - 0 {m}. Opponent replied {pv.split()[0]}."),
               tool="engine")
    t.emit(None, t.choose("Game over: 1-0 by resignation.", "Draw by repetition agreed.", "Won on time.", "Lost: 0-1."))
    return t.script(actions)


@healthy
def email_campaign_send(rng: random.Random, actions: bool) -> Script:
    """An e-mail campaign: build segments, wait (declared) for a marketer's approval, then send in batches."""
    t = T2(rng)
    segs = t.rng.sample(("trial-ending", "churn-risk", "power-users", "dormant-90d", "newsletter-de", "newsletter-fr", "beta-invitees"), t.rng.randint(2, 4))
    for s in segs:
        t.emit(f"mailer segments build {s}", f"segment {s}: {t.num(t.rng.randint(500, 90000))} recipients ({t.num(t.rng.randint(0, 900))} suppressed)", tool="mailer")
    approval = t.rng.uniform(0.4, 3.0) * t.lease
    t.emit("mailer request-approval --to marketing", f"approval request {t.rid()} sent to {t.choose('maria@', 'jp@', 'ops@')}…",
           tool="mailer", wait=("human", approval))
    polls = t.rng.randint(2, 5)
    for _ in range(polls):
        t.advance(min(approval / polls, 0.35 * t.lease))
        t.emit("mailer approval-status", "pending (no response yet)", tool="mailer", wait=("human", approval))
    t.emit("mailer approval-status", f"approved by {t.choose('Maria', 'J.P.', 'Ops on-call')} at {t.stamp()}", tool="mailer")
    for s in segs:
        total = t.rng.randint(500, 90000)
        sent = 0
        while sent < total:
            b = min(total - sent, t.rng.randint(2000, 20000))
            sent += b
            t.emit(f"mailer send {s} --batch {b}", f"{s}: {t.num(sent)}/{t.num(total)} sent, {t.rng.randint(0, 40)} bounced, msg ids {t.rid()}…",
                   tool="mailer", units=(sent, total))
    return t.script(actions)


# ---------------------------------------------------------------------------------------------- loops
@looping
def reask_user_reworded(rng: random.Random, actions: bool) -> Script:
    """An assistant asks its user the same question in new words; the auto-reply answers the same each time."""
    t = T2(rng)
    who = t.choose("Dana", "Mr. Okafor", "Frau Keller", "Yuki")
    warmup(t, [
        ("mail", f"mail.search('from:{who.split()[-1].lower()}')", f"{t.rng.randint(1, 30)} messages; latest: Re: renewal"),
        ("mail", "mail.read(thread='Re: renewal')", f"{who}: the renewal starts on the 1st; numbers are in the attached quote."),
        ("crm", "crm.account(name='Globex')", f"entities: Globex Europe BV (EU), Globex Inc. (US); ARR {t.num(t.rng.uniform(5e4, 9e5), 0)}"),
        ("files", "files.open('quote-renewal.pdf')", f"Quote {t.rng.randint(1000, 9999)}: {t.rng.randint(20, 400)} seats, term 12 months, entity: (blank)"),
        ("billing", "billing.draft_invoice(quote=…)", "error: billing entity required"),
        ("calendar", f"calendar.free_busy('{who}')", "busy all week (out of office)"),
        ("mail", "mail.search('subject:entity')", "0 messages"),
        ("crm", "crm.notes(account='Globex')", f"{t.rng.randint(2, 9)} notes; last: 'EU entity for EMEA seats?' (unanswered)"),
    ])
    back = t.choose("Monday 14 October", "after 3 January", "on the 22nd")
    t.loop()
    for _ in range(loop_reports(t)):
        q = t.choose(f"Hi {who}, should the renewal go to the EU or the US entity?",
                     f"{who}, quick check: which entity do we bill for the renewal — EU or US?",
                     f"Sorry to bother you again, {who} — EU or US entity for the renewal invoice?",
                     f"Dear {who}, could you confirm the billing entity (EU/US) for the renewal?",
                     "Following up: which legal entity should the renewal be issued to?")
        t.emit(f"mail.send(to='{who}', body={q!r})",
               f"sent <{t.rid()}@mail.example.com>\nauto-reply from {who}: I am out of the office until {back} with limited access to e-mail.",
               tool="mail", note=t.say("No answer yet; asking again.", "Let me rephrase the question.", "", "Following up."))
    return t.script(actions)


@looping
def replan_same_plan(rng: random.Random, actions: bool) -> Script:
    """The agent writes its plan again and again in new words; its todo tool acknowledges each rewrite."""
    t = T2(rng)
    files = ("README.md", "src/app.py", "setup.cfg", "docs/api.md", "src/config.py", "tests/test_config.py", "CHANGELOG.md", "src/cli.py")
    for f in t.rng.sample(files, prefix(t)):
        t.emit(f"read_file('{f}')", f"{t.rng.randint(20, 400)} lines; {t.choose('defines', 'mentions', 'imports')} "
               f"{t.choose('load_config', 'Settings', 'parse_args', 'DEFAULTS', 'main')}", tool="read_file")
    steps = [("reproduce the crash", "get the crash to happen again", "trigger the bug locally"),
             ("find where the config is parsed", "locate the config parser", "track down config loading"),
             ("add a regression test", "write a test that fails first", "cover it with a failing test"),
             ("fix the null handling", "handle the missing value", "guard against None")]
    t.loop()
    for k in range(loop_reports(t)):
        plan = "\n".join(f"{i + 1}{t.choose('.', ')', ' -')} {t.rng.choice(opts).capitalize()}" for i, opts in enumerate(steps))
        intro = t.choose("Let me step back and plan.", "New plan:", "Re-planning before acting:", "OK, thinking about this again.",
                         "Before I continue, the plan is:", "Let me restate the approach.")
        t.emit("todo_write(todos=[…4 items…])", "Todos have been modified successfully. 4 pending, 0 in progress, 0 completed.",
               tool="todo_write", note=f"{intro}\n{plan}")
    return t.script(actions)


@looping
def chess_illegal_move(rng: random.Random, actions: bool) -> Script:
    """A game agent submits the same illegal move in other notations; the board never changes."""
    t = T2(rng)
    opening = (("e2e4", "e7e5"), ("g1f3", "b8c6"), ("f1c4", "f8c5"), ("c2c3", "g8f6"), ("d2d3", "d7d6"), ("b1d2", "a7a6"),
               ("h2h3", "c8e6"), ("a2a4", "h7h6"))
    warmup(t, [("engine", f"engine.play(move='{w}')", f"ok: {w}, reply {b}; eval {t.rng.gauss(0, 0.3):+.2f} at depth {t.rng.randint(18, 26)}")
               for w, b in opening])
    fen = t.choose("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3",
                   "rnbqkb1r/pp2pppp/3p1n2/8/3NP3/8/PPP2PPP/RNBQKB1R w KQkq - 1 5")
    t.loop()
    for _ in range(loop_reports(t)):
        mv = t.choose("e1g1", "O-O", "Kg1", "castle kingside", "0-0", "Ke1-g1")
        t.emit(f"engine.play(move='{mv}')",
               t.choose(f"illegal move: {mv} (king cannot castle through check)\nposition unchanged: {fen}",
                        f"error: move {mv!r} rejected — castling not allowed here\nFEN {fen}"),
               tool="engine", note=t.say("Castling should be fine now.", "Let me castle.", "", "Trying the castle again."))
    return t.script(actions)


@looping
def docqa_retrieval_empty(rng: random.Random, actions: bool) -> Script:
    """A QA agent reformulates its query; the index returns nothing each time (new query ids, latencies)."""
    t = T2(rng)
    topics = t.rng.sample(("payment terms", "liability cap", "termination", "uptime commitment", "audit rights", "sub-processors",
                           "backup retention", "encryption at rest", "governing law"), 8)
    warmup(t, [("retrieve", f"retrieve(query={q!r})", f"{t.rng.randint(2, 5)} chunks, top [p.{t.rng.randint(1, 90)}] score {t.rng.uniform(0.6, 0.9):.3f}: "
                f"{t.choose('Fees are due', 'The cap equals', 'Either party may', 'Provider shall', 'Backups are kept')} {t.rng.randint(2, 120)} "
                f"{t.choose('days', 'months', 'percent')}") for q in topics])
    t.loop()
    for _ in range(loop_reports(t)):
        q = t.choose("data residency requirements", "where must customer data be stored", "data location obligations EU",
                     "storage region of personal data", "residency of customer data in the agreement", "geographic restrictions on hosting")
        t.emit(f"retrieve(query={q!r}, k=8)",
               t.choose(f'{{"query_id": "{t.rid()}", "hits": [], "took_ms": {t.rng.randint(3, 400)}}}',
                        f"0 results for {q!r} ({t.took(t.rng.uniform(0.003, 0.4))})"),
               tool="retrieve", note=t.say("Nothing; rephrasing.", "Let me try other words.", "", "Different query."))
    return t.script(actions)
