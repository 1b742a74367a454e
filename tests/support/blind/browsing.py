"""Browsing agents: pages, forms, listings, captchas (and buttons that do nothing)."""

from __future__ import annotations

import random

from ..stalls import Script
from . import noise, phrases
from .trace import Trial, healthy, looping, pick
from .words import ADJECTIVES, CITIES, NOUNS, ORGS, PEOPLE


class Page:
    """Renders a page's elements the way this trial's browser tool reports them."""

    def __init__(self, t: Trial) -> None:
        self.t = t
        self.style = t.rng.randrange(3)

    def render(self, url: str, title: str, elements: list[tuple[str, str]], text: list[str] | None = None) -> str:
        rng = self.t.rng
        base = rng.randint(1, 400)  # element refs are numbered afresh on every snapshot
        if self.style == 0:
            els = "\n".join(f'- {role} "{name}" [ref=e{base + i}]' for i, (role, name) in enumerate(elements))
            body = "\n".join(f"- text: {s}" for s in text or [])
            return f"- Page URL: {url}\n- Page Title: {title}\n- Page Snapshot:\n```yaml\n{els}\n{body}\n```"
        if self.style == 1:
            tags = {"button": "button", "link": "a", "textbox": "input", "heading": "h2", "checkbox": "input", "combobox": "select"}
            els = "\n".join(f"[{base + i}]<{tags.get(r, 'div')}>{n}</{tags.get(r, 'div')}>" for i, (r, n) in enumerate(elements))
            return f"Current url: {url}\nTitle: {title}\nInteractive elements:\n{els}\n" + "\n".join(text or [])
        return f"Navigated to {url}\n# {title}\n" + "\n".join(text or []) + "\n" + "\n".join(f"{r}: {n}" for r, n in elements)


def chrome(rng: random.Random, site: str) -> list[tuple[str, str]]:
    return [("link", site), ("link", "Sign in"), ("textbox", "Search"), ("link", "Help"), ("button", "Accept cookies")]


@healthy
def shopping_compare(rng: random.Random, actions: bool) -> Script:
    """Open product pages one by one and note price, rating and stock of each."""
    t = Trial(rng)
    pg, site = Page(t), t.names.host()
    for _ in range(rng.randint(8, 18)):
        name = f"{rng.choice(ADJECTIVES).title()} {rng.choice(NOUNS).title()} {rng.choice(('Pro', 'Lite', '2', 'XL', 'Mini'))}"
        price, rating = f"${rng.randint(9, 900)}.{rng.choice(('99', '49', '00'))}", f"{rng.uniform(2.5, 5):.1f}"
        url = f"https://{site}/p/{t.names.slug()}/{noise.b62(rng, 10)}"
        els = chrome(rng, site) + [("heading", name), ("button", "Add to cart"), ("combobox", "Quantity")]
        text = [f"{price}", f"{rating} out of 5 stars ({rng.randint(3, 9000)} ratings)",
                pick(rng, "In stock", f"Only {rng.randint(1, 9)} left", "Ships in 2-3 weeks")]
        t.emit(f"navigate {url}", pg.render(url, f"{name} | {site}", els, text), tool="browser")
        t.emit(None, f"{name}: {price}, {rating}★, {text[2]}")
    return t.script(actions)


@healthy
def form_wizard(rng: random.Random, actions: bool) -> Script:
    """Fill a multi-page application form: every page asks for other fields."""
    t = Trial(rng)
    pg, site = Page(t), t.names.host()
    fields = ["First name", "Last name", "Email", "Phone", "Street", "City", "Postcode", "Country", "Company", "VAT number",
              "Date of birth", "Employer", "Job title", "Annual income", "IBAN", "Emergency contact", "Preferred language"]
    rng.shuffle(fields)
    pages = [fields[i:i + rng.randint(2, 4)] for i in range(0, len(fields), 3)][: rng.randint(4, 6)]
    person = rng.choice(PEOPLE)
    for k, group in enumerate(pages):
        url = f"https://{site}/apply/step-{k + 1}?session={noise.b62(rng, 16)}"
        t.emit(f"snapshot {url}", pg.render(url, f"Application — step {k + 1} of {len(pages)}",
                                            [("textbox", f) for f in group] + [("button", "Continue")]), tool="browser",
               units=(k, len(pages)))
        for f in group:
            val = {"First name": person.split()[0], "Last name": person.split()[1], "City": rng.choice(CITIES),
                   "Company": rng.choice(ORGS), "Email": f"{person.split()[0].lower()}@{site}", "Phone": f"+44 7{rng.randint(100, 999)} "
                   f"{rng.randint(100000, 999999)}", "Street": f"{rng.randint(1, 200)} {rng.choice(NOUNS).title()} Road",
                   "Postcode": f"{rng.randint(10000, 99999)}", "Country": rng.choice(("Portugal", "Norway", "Kenya", "Japan")),
                   "Date of birth": f"{rng.randint(1, 28):02d}/{rng.randint(1, 12):02d}/{rng.randint(1950, 2004)}",
                   "Annual income": f"{rng.randint(20, 200)},000", "IBAN": f"GB{rng.randint(10, 99)}{noise.b62(rng, 18).upper()}",
                   "Emergency contact": rng.choice(PEOPLE)}.get(f, f"{rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}")
            t.emit(f'type "{val}" into "{f}"', pick(rng, f'Typed "{val}" into textbox "{f}"', "Done", f"filled {f}"), tool="browser",
                   units=(k, len(pages)))
        t.emit('click "Continue"', pick(rng, f"Clicked button \"Continue\"; navigated to step {k + 2}", "Clicked. Page changed."),
               tool="browser", units=(k + 1, len(pages)))
    return t.script(actions)


@healthy
def listings_paginate(rng: random.Random, actions: bool) -> Script:
    """Page through search listings; each page shows listings not seen before."""
    t = Trial(rng)
    pg, site = Page(t), t.names.host()
    pages = rng.randint(6, 15)
    kind = pick(rng, "job", "flat", "car")
    for p in range(1, pages + 1):
        rows = []
        for _ in range(rng.randint(5, 12)):
            if kind == "job":
                rows.append(f"{rng.choice(('Senior', 'Staff', 'Junior', 'Lead'))} {rng.choice(NOUNS).title()} Engineer — {t.names.pick(ORGS)}, "
                            f"{rng.choice(CITIES)} — ${rng.randint(60, 250)}k")
            elif kind == "flat":
                rows.append(f"{rng.randint(1, 4)}-bed flat, {rng.choice(CITIES)} {rng.choice(NOUNS).title()} St {rng.randint(1, 200)} — "
                            f"€{rng.randint(600, 4000)}/month, {rng.randint(30, 140)} m²")
            else:
                rows.append(f"{rng.randint(2008, 2024)} {rng.choice(NOUNS).title()} {rng.choice(('GT', 'LX', 'Sport'))} — "
                            f"{rng.randint(10, 220)},{rng.randint(100, 999)} km — ${rng.randint(3, 60)},{rng.randint(100, 999)}")
        url = f"https://{site}/search?q={kind}&page={p}"
        t.emit(f"navigate {url}", pg.render(url, f"{kind.title()}s — page {p} of {pages}", [("link", "Next"), ("link", "Previous")], rows),
               tool="browser", units=(p, pages))
    return t.script(actions)


@healthy
def scrape_table(rng: random.Random, actions: bool) -> Script:
    """Extract a paginated table (results of a public register) into rows."""
    t = Trial(rng)
    site = t.names.host()
    per = rng.choice((25, 50, 100))
    total = per * rng.randint(14, 60) - rng.randint(0, per - 1)
    start = rng.randrange(0, total // 2, per)
    for a in range(start, min(total, start + per * rng.randint(10, 25)), per):
        rows = [f"{rng.randint(10**6, 10**7)} | {rng.choice(ORGS)} {rng.choice(('Ltd', 'GmbH', 'Inc', 'BV'))} | {rng.choice(CITIES)} | "
                f"{noise.stamp(t.now - rng.randint(0, 10**8), 3)[:10]}" for _ in range(3)]
        b = min(total, a + per)
        t.emit(f"extract_table https://{site}/register?offset={a}",
               f"Showing {t.n(a + 1)} to {t.n(b)} of {t.n(total)} entries\n" + "\n".join(rows) + f"\n… ({b - a - 3} more rows saved)",
               tool="browser", units=(b, total))
    return t.script(actions)


@healthy
def captcha_human_wait(rng: random.Random, actions: bool) -> Script:
    """Hit a captcha, declare a wait on a person to solve it, poll the page, then carry on."""
    t = Trial(rng, rate=rng.uniform(5, 40))
    pg, site = Page(t), t.names.host()
    for _ in range(rng.randint(2, 5)):
        url = f"https://{site}/{t.names.slug()}"
        t.emit(f"navigate {url}", pg.render(url, t.names.slug().replace("-", " ").title(), chrome(rng, site),
                                            [f"{rng.choice(NOUNS).title()} {rng.randint(1, 99)}: {t.names.ident()}"]), tool="browser")
    wait_s = rng.choice((300.0, 600.0, 900.0, 1800.0))
    started = t.now
    url = f"https://{site}/challenge?r={noise.b62(rng, 12)}"
    while t.now - started < 0.7 * wait_s and len(t.beats) < 30:
        t.emit("screenshot", pg.render(url, "Just a moment...", [("checkbox", "Verify you are human")],
                                       ["Please complete the security check to continue."]), tool="browser", wait=("human", wait_s))
    t.emit(None, "Captcha solved by operator; continuing.")
    for _ in range(rng.randint(3, 8)):
        url = f"https://{site}/{t.names.slug()}"
        t.emit(f"navigate {url}", pg.render(url, t.names.slug().replace("-", " ").title(), chrome(rng, site),
                                            [f"{rng.choice(NOUNS).title()}: {t.names.ident()} ({rng.randint(1, 999)})"]), tool="browser")
    return t.script(actions)


@healthy
def docs_navigation(rng: random.Random, actions: bool) -> Script:
    """Read a documentation site: every page repeats the sidebar around a short new section."""
    t = Trial(rng)
    pg, site = Page(t), f"docs.{rng.choice(NOUNS)}{rng.choice(('.dev', '.io', '.org', 'hq.com'))}"
    sidebar = [("link", s) for s in ("Getting started", "Installation", "Configuration", "CLI reference", "API", "FAQ", "Changelog")]
    for _ in range(rng.randint(10, 22)):
        topic = f"{rng.choice(NOUNS)}.{rng.choice(NOUNS)}"
        text = [f"## `{topic}`", f"Default: `{pick(rng, 'true', 'false', str(rng.randint(1, 600)), repr(t.names.ident()))}`. "
                f"{pick(rng, 'Sets', 'Controls', 'Limits', 'Enables')} the {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)} of each "
                f"{rng.choice(NOUNS)}.", f"Since v{rng.randint(1, 6)}.{rng.randint(0, 20)}."]
        url = f"https://{site}/reference/{topic.replace('.', '/')}"
        t.emit(f"navigate {url}", pg.render(url, f"{topic} — Reference", chrome(rng, site) + sidebar, text), tool="browser")
    return t.script(actions)


# ---------------------------------------------------------------------- loops
def _prefix(t: Trial, pg: Page, site: str) -> None:
    for _ in range(t.rng.randint(2, 6)):
        url = f"https://{site}/{t.names.slug()}"
        t.emit(f"navigate {url}", pg.render(url, t.names.slug().replace("-", " ").title(), chrome(t.rng, site),
                                            [f"{t.rng.choice(NOUNS).title()}: {t.names.ident()}"]), tool="browser")


@looping
def captcha_retry(rng: random.Random, actions: bool) -> Script:
    """Reload past a bot check without asking anyone: the same challenge, a new ray id every time."""
    t = Trial(rng)
    pg, site = Page(t), t.names.host()
    _prefix(t, pg, site)
    url = f"https://{site}/{t.names.slug()}"
    t.loop()
    for _ in range(5 + rng.randint(3, 10)):
        t.emit(pick(rng, f"navigate {url}", "reload", "go_back then navigate"),
               pg.render(url, "Just a moment...", [("checkbox", "Verify you are human")],
                         ["Checking if the site connection is secure", f"Ray ID: {noise.hexid(rng, 16)}",
                          f"Performance & security by Cloudflare · {t.ts()}"]), tool="browser",
               note=rng.choice((None, phrases.retry(rng, "loading the page"))))
    return t.script(actions)


@looping
def login_redirect(rng: random.Random, actions: bool) -> Script:
    """Fill the login form, submit, land on the login form again (a new CSRF token each time)."""
    t = Trial(rng)
    pg, site = Page(t), t.names.host()
    _prefix(t, pg, site)
    email = f"{rng.choice(PEOPLE).split()[0].lower()}@{site}"
    t.loop(3)
    for _ in range(-(-(5 + rng.randint(3, 10)) // 3)):
        t.emit(f'type "{email}" into "Email"', 'Typed into textbox "Email"', tool="browser")
        t.emit('type "********" into "Password"', 'Typed into textbox "Password"', tool="browser")
        url = f"https://{site}/login?next=%2Fdashboard&csrf={noise.b62(rng, 32)}"
        t.emit('click "Sign in"', pg.render(url, "Sign in", [("textbox", "Email"), ("textbox", "Password"), ("button", "Sign in"),
                                                              ("link", "Forgot password?")]), tool="browser")
    return t.script(actions)


@looping
def click_no_effect(rng: random.Random, actions: bool) -> Script:
    """Click a button that does nothing; the snapshot comes back the same, element refs renumbered."""
    t = Trial(rng)
    pg, site = Page(t), t.names.host()
    _prefix(t, pg, site)
    url = f"https://{site}/checkout"
    button = pick(rng, "Place order", "Continue to payment", "Submit", "Next")
    els = chrome(rng, site) + [("heading", "Checkout"), ("button", button), ("textbox", "Promo code")]
    text = [f"Total: ${rng.randint(20, 900)}.{rng.randint(10, 99)}", pick(rng, "Delivery: 2–4 days", "Free shipping")]
    shot = rng.random() < 0.5
    t.loop(2 if shot else 1)
    for _ in range(-(-(5 + rng.randint(3, 10)) // (2 if shot else 1))):
        t.emit(f'click "{button}"', pg.render(url, "Checkout", els, text), tool="browser",
               note=rng.choice((None, phrases.retry(rng, f"the {button} button"))))
        if shot:
            t.emit("screenshot", f"Screenshot saved: {noise.tmpdir(rng, 0)}/page-{noise.file_stamp(t.now)}.png (1280×800)", tool="browser")
    return t.script(actions)


@looping
def infinite_scroll_stuck(rng: random.Random, actions: bool) -> Script:
    """Scroll to load more; the list never grows, the spinner stays."""
    t = Trial(rng)
    pg, site = Page(t), t.names.host()
    _prefix(t, pg, site)
    items = [f"{rng.choice(NOUNS).title()} {rng.choice(ADJECTIVES)} — {rng.choice(CITIES)}" for _ in range(rng.randint(8, 20))]
    y = rng.randint(800, 3000)  # the bottom of the page: it never grows
    t.loop(2)
    for _ in range(-(-(5 + rng.randint(3, 10)) // 2)):
        px = rng.choice((600, 800, 1000))
        t.emit(f"scroll down {px}px", f"Scrolled down {px}px (now at y={y}, page end). Loading…", tool="browser")
        t.emit("extract_list .feed-item", f"{len(items)} items\n" + "\n".join(items), tool="browser")
    return t.script(actions)
