"""The loop rules judged on a node's own stream: the same steps retried into the same failure however
the other steps are worded, the same action bringing next to nothing beside what the node usually
brings, and a node's own rhythm (after each item the same rerun and the same note) that is no loop."""

from __future__ import annotations

import pytest

from tests.support.loop_alarms import loops, start


@pytest.fixture
def claim(ledger):
    return start(ledger)


def beat(ledger, clock, claim, **kw):
    clock.advance(7)
    ledger.heartbeat(claim, **kw)


DRAFTS = ["Dear customer, sorry about the delay. I have escalated this. Kind regards",
          "Hello, apologies for the delay. I have escalated this. Cheers",
          "Hi, sorry about the delay. We will look into it. Best"]
REJECTED = "Rejected by reply policy: no link to the policy page. (check id {})"


def test_the_same_steps_retried_into_the_same_failure_are_a_loop_at_period_plus_two(ledger, clock, claim):
    beat(ledger, clock, claim, action="get_ticket(24242)", result="#24242: I was charged twice for the backup plan")
    beat(ledger, clock, claim, action="get_ticket(16466)", result="#16466: a refund for the annual plan, please")
    seen = []
    for i in range(2):
        beat(ledger, clock, claim, action="draft_reply(36743)", result=DRAFTS[i])
        seen.append(loops(ledger))
        beat(ledger, clock, claim, action="submit_reply(36743)", result=REJECTED.format(f"{0xbeef + 97 * i:x}"))
        seen.append(loops(ledger))
    assert seen[:3] == [[], [], []]
    (s,) = seen[3]  # the 4th step of a cycle of 2: its period + 2
    assert s.kind == "repeating" and s.evidence.startswith("the same 2 steps again, 4 in a row, and the same failure:")


def test_other_steps_between_the_same_failure_are_not_the_same_steps(ledger, clock, claim):
    beat(ledger, clock, claim, action="get_ticket(24242)", result="#24242: I was charged twice for the backup plan")
    for i, act in enumerate(["draft_reply(36743)", "read_policy('links')"]):
        beat(ledger, clock, claim, action=act, result=DRAFTS[i])
        beat(ledger, clock, claim, action="submit_reply(36743)", result=REJECTED.format(f"{0xbeef + 97 * i:x}"))
    assert loops(ledger) == []


def build(crates):
    return "".join(f"   Compiling {c}\n" for c in crates) + (
        "error[E0308]: mismatched types\n  --> src/jobs/policy_order.rs:235:38\n"
        "expected `BatchOptions`, found `Option<BatchOptions>`")


READS = ["fn parse_order(x: &str) -> Order {\n    let batch = split(x);\n    Order::new(batch)\n}",
         "impl Queue {\n    fn push(&mut self, job: Job) {\n        self.jobs.push(job);\n    }\n}",
         "struct Batch {\n    options: BatchOptions,\n    retries: u32,\n    name: String,\n}"]


def test_the_same_action_bringing_next_to_nothing_against_the_nodes_normal_is_no_new_info(ledger, clock, claim):
    for i, text in enumerate(READS):
        beat(ledger, clock, claim, action=f"read src/jobs/f{i}.rs", result=text)
    crates = ["regex v1.4.2", "clap v1.11.8", "libc v1.22.2", "serde v1.15.6", "itoa v1.19.8", "bytes v1.29.0"]
    beat(ledger, clock, claim, action="cargo check", result=build(crates[:1]))
    for i in range(1, 4):  # each rebuild recompiles another crate: one new line, the same error
        assert loops(ledger) == [], i
        beat(ledger, clock, claim, action="cargo check", result=build(crates[i:i + 1]))
    assert loops(ledger) == []
    beat(ledger, clock, claim, action="cargo check", result=build(crates[4:5]))
    (s,) = loops(ledger)
    assert s.kind == "no_new_info" and s.evidence.startswith("the same action 4 times, each bringing at most 1 new line")


def test_the_same_action_bringing_what_the_node_usually_brings_is_quiet(ledger, clock, claim):
    for i, text in enumerate(READS):
        beat(ledger, clock, claim, action=f"read src/jobs/f{i}.rs", result=text)
    for i in range(6):  # the same query, each page other rows
        rows = "\n".join(f"row {10 * i + k}: account {chr(97 + k)}{i} plan {['gold', 'basic', 'team'][k % 3]}"
                         for k in range(4))
        beat(ledger, clock, claim, action="sql next_page", result=rows)
    assert loops(ledger) == []


def test_the_same_rerun_and_note_after_each_item_is_the_nodes_rhythm(ledger, clock, claim):
    names = ["test_validate_ledger", "test_export_cursor", "test_dispatch_bundle", "test_prune_session",
             "test_sync_secret", "test_merge_invoice"]
    funcs = ["def hydrate_payment():\ndef retry_token():", "def emit_sorter():\ndef normalize_table():",
             "def compute_coupon():\ndef verify_queue():", "def cache_user():\ndef download_avatar():",
             "def unwrap_manifest():\ndef export_chart():", "def decode_currency():\ndef dispatch_shipment():"]
    for i, (name, listing) in enumerate(zip(names, funcs)):
        for text in (f"FAILED tests/test_x.py::{name} - TimeoutError: lock wait exceeded", "5 passed in 2.2 seconds",
                     f"{name} is flaky (timing); filed issue #{len(name) * 7} and marked it.", listing):
            beat(ledger, clock, claim, observation=text)
            # the second item alone could be a cycle beginning; from the third, the rerun and the
            # note came before the cycle did: the node's rhythm
            assert i < 2 or loops(ledger) == [], (name, text)
