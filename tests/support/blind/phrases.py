"""How agents narrate: the same intent in ever new words (a retry, a hunch, a promise to look again)."""

from __future__ import annotations

import random

OPENERS = ("", "", "OK, ", "Hmm, ", "Right — ", "Alright. ", "Still failing. ", "Interesting. ", "Let me think. ",
           "I see. ", "Okay so ", "Wait — ", "Got it. ", "Noted. ")
RETRY = ("let me try {what} again", "I'll re-run {what}", "running {what} once more", "trying {what} one more time",
         "re-running {what} to confirm", "let me rerun {what}", "I'll give {what} another go", "kicking off {what} again",
         "retrying {what}", "let's run {what} again and look closely", "one more attempt at {what}",
         "I'll rerun {what} to see if it was transient", "repeating {what} with a clean slate", "going to try {what} again")
CLOSERS = ("", "", ".", ".", " to see if that helped.", " — maybe it was flaky.", " after that change.",
           " and check the output carefully.", ", then compare.", " now.", " just to be sure.")
HUNCHES = ("maybe it is generated at build time", "perhaps it was renamed in a recent commit",
           "it could be defined in a plugin", "it might be re-exported from an index file",
           "possibly it lives in a vendored copy", "it may come from a macro", "maybe the casing is different",
           "perhaps the definition is in a test helper", "it might be behind a feature flag",
           "it could be declared in a .d.ts file", "it may be injected at runtime", "maybe it's in another package of the workspace",
           "perhaps the docs use an older name", "it might be spelled with an underscore", "could be under a different directory")
THEN = ("searching for {p}", "trying {p}", "let me look for {p}", "I'll grep for {p}", "checking {p} instead",
        "next: {p}", "looking up {p}", "let me search {p}")


def retry(rng: random.Random, what: str) -> str:
    s = rng.choice(OPENERS) + rng.choice(RETRY).format(what=what) + rng.choice(CLOSERS)
    return s[0].upper() + s[1:]


def hunch(rng: random.Random, pattern: str) -> str:
    s = rng.choice(OPENERS) + rng.choice(HUNCHES) + "; " + rng.choice(THEN).format(p=pattern) + rng.choice((".", "", "…"))
    return s[0].upper() + s[1:]


def still(rng: random.Random, what: str) -> str:
    """The agent reporting, in its words, that nothing changed."""
    return rng.choice((f"Same {what} as before.", f"Still the {what}.", f"The {what} persists.",
                       f"No change — {what} again.", f"{what.capitalize()} is still there.",
                       f"Hmm, {what} remains.", f"That didn't fix the {what}.", f"Again: {what}."))
