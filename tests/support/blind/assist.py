"""Assistant agents on office work: tickets, mail, translations, writing (and replies that never pass)."""

from __future__ import annotations

import random

from ..stalls import Script
from . import noise, phrases
from .trace import Trial, healthy, looping, pick
from .words import ADJECTIVES, CITIES, NOUNS, ORGS, PEOPLE

COMPLAINTS = ("my {n} arrived {adj}", "I was charged twice for {n}", "the {n} page shows an error", "how do I export my {n}?",
              "cancel my {n} subscription", "the {n} never arrived in {city}", "can I change the {n} on my order?",
              "your app logs me out when I open {n}", "refund for the {adj} {n}", "the invoice lists the wrong {n}")


@healthy
def ticket_triage(rng: random.Random, actions: bool) -> Script:
    """Read each support ticket and label it; every ticket is another customer's problem."""
    t = Trial(rng)
    tid = rng.randint(10_000, 90_000)
    n = rng.randint(8, 18)
    for i in range(n):
        tid += rng.randint(1, 7)
        who = rng.choice(PEOPLE)
        text = rng.choice(COMPLAINTS).format(n=rng.choice(NOUNS), adj=rng.choice(ADJECTIVES), city=rng.choice(CITIES))
        t.emit(f"get_ticket({tid})", f"#{tid} from {who} <{who.split()[0].lower()}@{rng.choice(('gmail.com', 'proton.me', 'outlook.com'))}>\n"
               f"Subject: {text[:40]}\n\nHi, {text}. Order {rng.choice('ABCDEFGH')}-{rng.randint(100000, 999999)}. Thanks, {who.split()[0]}",
               tool="helpdesk", units=(i, n))
        label = pick(rng, "billing", "shipping", "bug", "account", "how-to", "refund")
        t.emit(f"update_ticket({tid}, labels=['{label}'], priority='{pick(rng, 'low', 'normal', 'high')}')",
               f"ticket {tid} updated ({label})", tool="helpdesk", units=(i + 1, n))
    return t.script(actions)


@healthy
def inbox_processing(rng: random.Random, actions: bool) -> Script:
    """Work through an inbox: read, file, reply or archive, message by message."""
    t = Trial(rng)
    n = rng.randint(10, 24)
    for i in range(n):
        mid = f"<{noise.hexid(rng, 16)}@{rng.choice(('mail.gmail.com', 'outlook.com', 'example.org'))}>"
        sender, org = rng.choice(PEOPLE), rng.choice(ORGS)
        subj = pick(rng, f"Re: {rng.choice(NOUNS)} review", f"Invoice {rng.randint(1000, 9999)} from {org}", f"Meeting on {rng.choice(NOUNS)}",
                    f"[{org}] {rng.choice(NOUNS).title()} update", f"Question about the {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}")
        t.emit(f"read_message({mid})", f"From: {sender}\nSubject: {subj}\nDate: {noise.stamp(t.now - rng.randint(0, 86400), 7)}\n\n"
               f"{pick(rng, 'Could you', 'Please', 'Quick one:', 'FYI —')} {rng.choice(NOUNS)} {rng.choice(('is ready', 'needs sign-off', 'moved to Friday', 'is attached'))}.",
               tool="mail", units=(i, n))
        act = pick(rng, "archive", "label:finance", "label:later", "draft reply", "forward to ops")
        t.emit(f"{act.split(':')[0]}({mid})", f"{act}: done ({subj[:30]})", tool="mail", units=(i + 1, n))
    return t.script(actions)


@healthy
def translation_batch(rng: random.Random, actions: bool) -> Script:
    """Translate a locale file chunk by chunk; each chunk is other strings."""
    t = Trial(rng)
    lang = pick(rng, "de", "fr", "es", "ja", "pt-BR", "nl", "pl")
    per = rng.choice((20, 25, 40, 50))
    total = per * rng.randint(12, 40) - rng.randint(0, per - 1)
    done = rng.randrange(0, total // 3, per)
    while done < total and len(t.beats) < 36:
        keys = [f"{rng.choice(NOUNS)}.{rng.choice(NOUNS)}.{pick(rng, 'title', 'label', 'help', 'error', 'empty')}" for _ in range(3)]
        done = min(total, done + per)
        sample = "\n".join(f'  "{k}": "{pick(rng, "Speichern", "Annuler", "Buscar", "保存", "Opslaan", "Zapisz")} '
                           f'{rng.choice(NOUNS)}"' for k in keys)
        t.emit(f"translate locales/en.json -> locales/{lang}.json [{done - per}:{done}]", f"{per} strings translated, e.g.\n{sample}\n"
               f"progress {done}/{total}", tool="translate", units=(done, total))
    return t.script(actions)


@healthy
def doc_writing(rng: random.Random, actions: bool) -> Script:
    """Write a document section by section, checking it builds and counting the words."""
    t = Trial(rng)
    doc = f"docs/{rng.choice(NOUNS)}-guide.md"
    words = 0
    for _ in range(rng.randint(6, 14)):
        head = f"## {pick(rng, 'Configuring', 'Running', 'Troubleshooting', 'Upgrading', 'Securing')} the {rng.choice(NOUNS)} {rng.choice(NOUNS)}"
        add = rng.randint(80, 600)
        words += add
        first = (f"The {rng.choice(NOUNS)} {pick(rng, 'reads', 'writes', 'validates', 'caches')} its {rng.choice(NOUNS)} "
                 f"from `{t.names.ident()}` before each {rng.choice(NOUNS)}.")
        t.emit(f"append {doc}", f"{head}\n\n{first} …\n(+{add} words, {words} total)", tool="write")
        if rng.random() < 0.3:
            t.emit("mkdocs build --strict", f"INFO    -  Building documentation...\nINFO    -  Documentation built in {t.dur(rng.uniform(0.5, 9))}")
    return t.script(actions)


# ---------------------------------------------------------------------- loops
def _prefix(t: Trial) -> None:
    rng = t.rng
    for _ in range(rng.randint(2, 6)):
        tid = rng.randint(10_000, 90_000)
        text = rng.choice(COMPLAINTS).format(n=rng.choice(NOUNS), adj=rng.choice(ADJECTIVES), city=rng.choice(CITIES))
        t.emit(f"get_ticket({tid})", f"#{tid}: {text}", tool="helpdesk")


@looping
def tool_schema_error(rng: random.Random, actions: bool) -> Script:
    """A tool call refused for its arguments, retried with guesses the schema refuses just the same."""
    t = Trial(rng)
    _prefix(t)
    field = pick(rng, "priority", "status", "category")
    allowed = {"priority": ["low", "normal", "high"], "status": ["open", "pending", "solved"],
               "category": ["billing", "technical", "other"]}[field]
    guesses = {"priority": ("urgent", "URGENT", "Urgent", "critical", "p1", "highest", "1"),
               "status": ("closed", "Closed", "resolved", "done", "complete", "CLOSED"),
               "category": ("refund", "Refund", "payments", "invoice", "account", "billing_issue")}[field]
    tid = rng.randint(10_000, 90_000)
    t.loop()
    for _ in range(5 + rng.randint(3, 10)):
        g = rng.choice(guesses)
        t.emit(f"update_ticket({tid}, {field}='{g}')", f"Error: Invalid arguments for tool update_ticket: '{field}' must be one of "
               f"{allowed} (got '{g}')", tool="helpdesk", note=rng.choice((None, phrases.retry(rng, "the update"))))
    return t.script(actions)


@looping
def rate_limited_retry(rng: random.Random, actions: bool) -> Script:
    """Call an API again at once after every 429, never waiting for the retry-after it was given."""
    t = Trial(rng)
    _prefix(t)
    api = pick(rng, "https://api.example.com/v2/search", "https://api.github.com/search/code", "https://graph.microsoft.com/v1.0/me/messages")
    style = rng.randrange(5)
    t.loop()
    for _ in range(5 + rng.randint(3, 10)):
        t.emit(f"GET {api}?q={rng.choice(NOUNS)}", f"HTTP 429 Too Many Requests\nretry-after: {rng.randint(20, 120)}\n"
               f"x-request-id: {noise.request_id(rng, style)}\ndate: {noise.stamp(t.now, 7)}\n\n"
               f'{{"message": "API rate limit exceeded", "documentation_url": "https://{api.split("/")[2]}/docs/rate-limits"}}', tool="http")
    return t.script(actions)


@looping
def reply_rejected(rng: random.Random, actions: bool) -> Script:
    """Draft the same answer in new words and submit it; the checker rejects it for the same reason."""
    t = Trial(rng)
    _prefix(t)
    tid = rng.randint(10_000, 90_000)
    n = rng.choice(NOUNS)
    reason = pick(rng, "missing order number", "refund amount not stated", "no link to the policy page", "tone check failed: blames customer")
    t.loop(2)
    for _ in range(-(-(5 + rng.randint(3, 10)) // 2)):
        draft = (f"{pick(rng, 'Hi', 'Hello', 'Dear customer', 'Hi there')}, {pick(rng, 'sorry about', 'apologies for', 'thanks for flagging')} "
                 f"the {n}. {pick(rng, 'We will look into it.', 'Our team is on it.', 'I have escalated this.', 'We are checking now.')} "
                 f"{pick(rng, 'Best', 'Kind regards', 'Cheers', 'Thanks')}")
        t.emit(f"draft_reply({tid})", draft, tool="helpdesk")
        t.emit(f"submit_reply({tid})", f"Rejected by reply policy: {reason}. (check id {noise.hexid(rng, 8)})", tool="helpdesk")
    return t.script(actions)
