"""New information (store/judges/novelty.py, pure): volatile tokens, attempt-scoped lines, near copies,
repeats and cycles, and the bounded cost of one observation."""

from __future__ import annotations

import random

import pytest

from store.judges import novelty as N
from tests.support.observations import LOOPS, PREAMBLE, PROGRESS


@pytest.mark.parametrize("a,b", [
    ("retry #12: connection refused", "Retry  #13:   connection refused"),
    ("2027-01-15T08:00:00.123Z build started", "2027-01-16T09:10:11.999Z build started"),
    ("[2027-01-15 08:00:01,234] INFO step", "[2027-01-15 08:00:07,002] INFO step"),
    ("Fri Jan 15 08:00:01 UTC 2027 still waiting", "Sat Jan 16 18:10:01 UTC 2027 still waiting"),
    ("12:01:02 PM waiting for lock", "3:04:05 am waiting for lock"),
    ("took 950ms", "took 1.2s"),
    ("elapsed 2m30s", "elapsed 1h 2m"),
    ("request 550e8400-e29b-41d4-a716-446655440000 failed", "request 6ba7b810-9dad-11d1-80b4-00c04fd430c8 failed"),
    ("checking commit 3f2a9c1 now", "checking commit 9b0e77d4c3a1 now"),
    ("wrote /tmp/tmpa1b2c3d4/out.json", "wrote /tmp/tmpzz99yy88/out.json"),
    ("wrote /var/folders/x1/abc/T/foo.txt", "wrote /private/var/folders/q9/zz/T/bar.txt"),
    (r"saved C:\Users\bob\AppData\Local\Temp\xyz.tmp", r"saved C:\Users\ann\AppData\Local\Temp\abc.tmp"),
    ("[#####     ] 45% downloading", "[########  ] 80% downloading"),
    ("token a8zk2mq9pl0xt4vb3n done", "token q1w2e3r4t5y6u7i8o9 done"),
    ("object at 0x7ffd5a3b2c10", "object at 0x55d1e2f3a4b5"),
    ("x-request-id: 64f70b16146c2832", "x-request-id: b5d7c2e3bbe0c0b4"),  # a hex id whatever its first character
    ("commit 9b0e77d4 pushed", "commit ed4f59bf pushed"),
])
def test_what_changes_without_meaning_is_normalised_away(a, b):
    assert N.normalise_line(a) == N.normalise_line(b)


@pytest.mark.parametrize("a,b", [
    ("checked module parser", "checked module lexer"),
    ("monitor the build", "sunday the build"),
    ("fixed test_foo in tests/test_a.py", "fixed test_bar in tests/test_b.py"),
    ("deadbeef facade", "cafe facade"),
    ("bestmove e2e4 ponder e7e5", "bestmove g1f3 ponder b8c6"),  # squares and moves are names, not drawn ids
])
def test_words_stay_words(a, b):
    assert N.normalise_line(a) != N.normalise_line(b)


def test_the_original_text_is_kept_for_display_only_the_judgement_normalises():
    p = N.prepare("Retry #7 at 2027-01-15T08:00:00Z", attempt=1)
    assert p.lines == [N.normalise_line("retry #8 at 2031-12-01T23:59:59Z")]
    assert not any(c.isdigit() for c in p.lines[0]) and p.lines[0].startswith("retry")


def test_line_identity_is_per_attempt():
    assert N.line_digest(1, "same line") != N.line_digest(2, "same line")
    t = N.Tracker()
    assert t.observe("fetch the page", 1)[0] == 1
    assert t.observe("fetch the page", 1)[0] == 0
    assert t.observe("fetch the page", 2)[0] == 1  # a retry starts afresh


def test_a_near_copy_adds_nothing_and_keeps_the_identity():
    t = N.Tracker()
    base = "analysing the failing integration test again\nno new findings in the parser"
    n1, d1, _ = t.observe(base, 1)
    n2, d2, p = t.observe(base.replace("again", "agian").replace("findings", "findngs"), 1)
    assert (n1, n2) == (2, 0) and d2 == d1 and t.last is not None and t.last.echo_lag == 1


def test_a_new_line_among_old_context_is_new():
    t = N.Tracker()
    ctx = "\n".join(f"context line about {w}" for w in ("alpha", "beta", "gamma", "delta"))
    t.observe(ctx + "\nnext: compiled the parser", 1)
    n, _, p = t.observe(ctx + "\nnext: rewrote the scheduler", 1)
    assert n == 1 and t.last is not None and t.last.echo_lag is None


def test_short_lines_must_match_exactly():
    t = N.Tracker()
    t.observe("ok: parser", 1)
    assert t.observe("ok: lexer", 1)[0] == 1  # under NEAR_MIN_CHARS: no near copy


@pytest.mark.parametrize("seq,want", [
    ("AAA", (1, 3)), ("AA", None), ("BAAA", (1, 3)),
    ("ABAB", (2, 4)), ("ABA", None), ("ABCAB", (3, 5)), ("ABCA", None),
    ("ABCDAB", (4, 6)), ("ABCDA", None), ("ABCABD", None),
    ("XYABAB", (2, 4)), ("AABB", None),
])
def test_repeats_and_cycles(seq, want):
    r = N.judge_sequence(list(seq))
    assert (None if r is None else (r.period, r.observations)) == want


def test_a_repeat_says_where_it_started():
    r = N.judge_sequence(list("XYZABAB"))
    assert r is not None and r.period == 2 and r.start == 3


# ---------------------------------------------------------------------- the generators, judged purely
def _first_alarm(gen, rng, pre=0, n=8):
    """Observation (1-based, after its preamble) at which the pure judgement alarms, or None."""
    it = gen(rng)
    t = N.Tracker()
    for _ in range(pre):
        t.observe(next(it), 1)
    digests, news = [], []
    for i in range(n):
        new, d, _ = t.observe(next(it), 1)
        digests.append(d)
        news.append(new)
        if N.judge_sequence(digests) or (len(news) >= 5 and not any(news[-5:])):
            return i + 1
    return None


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_every_loop_style_is_judged_within_five(name):
    limit = 6 if name == "cycle of 4" else 5  # a cycle of 4 repeats first at its 5th observation
    for seed in range(25):
        first = _first_alarm(LOOPS[name], random.Random(seed), PREAMBLE.get(LOOPS[name], 0))
        assert first is not None and first <= limit, (name, seed, first)


@pytest.mark.parametrize("name", sorted(PROGRESS))
def test_progress_is_never_judged_a_loop(name):
    for seed in range(25):
        assert _first_alarm(PROGRESS[name], random.Random(seed), n=40) is None, (name, seed)


# ---------------------------------------------------------------------- bounded work
def test_a_million_lines_are_counted_not_examined():
    text = "\n".join(f"distinct line number {i} of many: {i * 7919 % 1000003}" for i in range(1_000_000))
    p = N.prepare(text, 1)
    assert len(p.line_digests) <= N.MAX_LINES and p.examined == N.MAX_LINES
    assert p.dropped_lines == 1_000_000 - N.MAX_LINES
    assert N.left_out(p) == f"{1_000_000 - N.MAX_LINES:,} lines past the first {N.MAX_LINES:,} not examined"


def test_a_huge_line_is_cut_and_counted():
    p = N.prepare("x" * 10_000_000 + "\nshort", 1)
    assert p.cut_lines == 1 and len(p.lines) == 2 and len(p.lines[0]) <= N.MAX_LINE_CHARS
    assert "1 lines cut to" in N.left_out(p)


def test_similarity_work_is_capped():
    recent = [N.Recent(f"d{i}", tuple(f"similar looking line number {j} of {i}" for j in range(200)))
              for i in range(4)]
    p = N.prepare("\n".join(f"similar looking line numbr {j} of x" for j in range(1000)), 1, recent)
    assert p.comparisons <= N.MAX_COMPARISONS


def test_rows_that_read_alike_but_hold_other_values_are_new():
    """A listing whose rows share their form with earlier rows but hold other plain values (other
    records, other numbers) is new work; the same rows again are not."""
    t = N.Tracker()
    rng = random.Random(3)
    pages = []
    for k in range(6):
        rows = "\n".join(f"Item {rng.randint(1000, 99999)}: Bay {rng.randint(1, 300)}" for _ in range(5))
        pages.append(f"200 OK page {k + 1}: 5 records\n{rows}")
        n, _, _ = t.observe(None, 1, action=f"fetch /items?page={k + 1}", result=pages[-1])
        assert n >= 1, (k, n)
    n, _, _ = t.observe(None, 1, action="fetch /items?page=2", result=pages[1])
    assert n == 0  # the same page again taught nothing
    rows = pages[-1].split("\n", 1)[1]
    for k, size in enumerate(("29.6", "30.1", "29.8")):  # the same records, only the page's size moves
        n, _, _ = t.observe(None, 1, action=f"fetch /items?page={20 + k}", result=f"200 OK ({size} KB)\n{rows}")
        assert n == (1 if k == 0 else 0), (k, n)


def test_a_reading_that_moves_is_not_a_repeat_but_a_failure_with_moving_numbers_is():
    t = N.Tracker()
    digests = []
    for v in ("0.0416", "0.0337", "0.0212"):
        n, d, _ = t.observe(None, 1, action="query error_rate", result=f"error_rate => {v} @ 2026-01-02T10:00:0{len(digests)}Z")
        digests.append(d)
    assert len(set(digests)) == 3 and n == 1
    t = N.Tracker()
    news = []
    for used in ("12.1", "12.3", "12.2", "12.4"):
        n, d, _ = t.observe(None, 1, action="run train.py", result=f"RuntimeError: out of memory: tried to allocate {used} GiB")
        news.append(n)
    assert news[1:] == [0, 0, 0]  # the same failure, whatever its numbers
    t = N.Tracker()
    news = []
    for stamp in ("10:00:01", "10:00:09", "10:00:17"):  # clock times, durations and ids are no new values
        n, d, _ = t.observe(None, 1, action="poll queue", result=f"{stamp} queue empty after 1{stamp[-1]}ms req-{stamp[-2:]}ab")
        news.append(n)
    assert news[1:] == [0, 0]


def test_a_value_labelled_as_a_time_is_a_duration_not_a_measure():
    t = N.Tracker()
    news = []
    for took in (298, 412, 77, 150):
        n, _, _ = t.observe(None, 1, action="search docs", result=f'{{"hits": [], "took_ms": {took}}}')
        news.append(n)
    assert news[1:] == [0, 0, 0]


def test_values_the_agent_wrote_are_met_when_its_lines_come_back_as_output():
    """Lines the agent wrote in its own words, then again as what came back (a note, then the
    lines): the values in them were met — no other record, no moved reading."""
    lines = ["job-7 step 2: found tomisolvi in solvihavel/pahalka.py",
             "job-7 step 3: renamed halka.py: endpoint feparu looks habelsol"]
    t = N.Tracker()
    for line in lines:
        n, _, _ = t.observe(line, 1)
        assert n == 1
    n, _, _ = t.observe("job-7 step 1: Finsolbelne losabel feju: traced cormorvel\n" + "\n".join(lines), 1)
    assert n == 0
    n, _, _ = t.observe(None, 1, result="\n".join(reversed(lines)))
    assert n == 0


def test_a_count_left_is_read_with_its_qualifiers_and_its_verb():
    """``N <words> remain`` counts down like ``N files left``: each step that lowers it is progress,
    even where its words read as a failure (problem, error)."""
    from store.judges.fields import fractions
    assert fractions("Qty: 240 cells changed (rows 232–77,400); 1,464 problem cells remain") == (("down", 1464.0, 0.0),)
    assert fractions("3 failing checks remaining") == (("down", 3.0, 0.0),)
    t = N.Tracker()
    moved = []
    for col, left in (("Phone", "2,803"), ("SKU", "2,058"), ("Email", "1,793"), ("Qty", "1,704"), ("Date", "1,464")):
        _, _, p = t.observe(None, 1, action=f"sheetfix book.xlsx --column {col}",
                            result=f"{col}: trimmed whitespace; 89 cells changed; {left} problem cells remain")
        moved.append(p.text_progress)
    assert moved[1:] == [True] * 4


def test_a_short_id_of_drawn_characters_is_still_an_id():
    assert N.normalise_line("job x2kqp9 done") == N.normalise_line("job q7zt3m done")
    assert N.normalise_line("ref a1b2c3d4 ok") == N.normalise_line("ref k9z8y7x6 ok")
