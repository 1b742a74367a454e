"""`warden otel export`: the journal as OpenTelemetry GenAI spans, sent by the SDK's OTLP/HTTP exporter.

Every test sends to a real OTLP/HTTP receiver on 127.0.0.1 (``tests/support/otlp_receiver.py``:
protobuf decoded with the protocol's own messages), and checks the attribute names against the
GenAI semantic conventions as the ``opentelemetry-semantic-conventions`` package defines them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http",
                    reason="warden otel needs the otel extra: pip install 'warden[otel]'")

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as genai  # noqa: E402
from opentelemetry.semconv.attributes import error_attributes  # noqa: E402

from store import Ledger  # noqa: E402
from store.adapters.otel.export import (Follower, StateFile, export_once, exporter_for,  # noqa: E402
                                        state_path)
from store.adapters.otel.spans import MAX_VALUE, value  # noqa: E402
from tests.support.otlp_receiver import Receiver, start_receiver  # noqa: E402
from tests.support.asks import ask

ROOT = Path(__file__).resolve().parents[2]
GENAI_NAMES = {v for k, v in vars(genai).items() if k.startswith("GEN_AI_") and isinstance(v, str)}
OPERATIONS = {m.value for m in genai.GenAiOperationNameValues}
OPTS = [{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}]
HOSTILE = "\x1b[31mred\x1b[0m [bold]x[/bold] \u202eevil"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = start_receiver()
    yield r
    r.close()


def story(led: Ledger, clock: Any) -> None:
    """A task that ran through retries, a handoff and an operator's rewind, and one still running."""
    led.create_task("t1", title="Research", workflow="research")
    led.add_node("t1", "plan", kind="llm")
    led.add_node("t1", "search", kind="tool", deps=["plan"])
    c = led.claim("t1", "w1", lease_s=600)
    clock.advance(2)
    led.heartbeat(c, tokens=120, action="think()", result=HOSTILE)
    clock.advance(3)
    led.commit(c, output={"plan": 1}, tokens=300)
    c = led.claim("t1", "w1", lease_s=600)
    led.heartbeat(c, tokens=10, action="search('moths')", result="0 results")
    clock.advance(1)
    led.fail(c, error="timeout from the search API", retry_after_s=0)
    c = led.claim("t1", "w2", lease_s=600)
    ask(led, c, kind="permission", question="Allow the paid API?", options=OPTS)
    clock.advance(5)
    led.apply(led.plan_rewind("t1", "plan", reason="the plan missed the brief"), operator="alice")
    for _ in range(2):
        c = led.claim("t1", "w1", lease_s=600)
        clock.advance(1)
        led.commit(c, output=1, tokens=5)
    assert led.task("t1").status == "completed"
    led.create_task("t2", title="Still going", workflow="crawl")
    led.add_node("t2", "fetch", kind="tool")
    c = led.claim("t2", "w3", lease_s=600)
    led.heartbeat(c, tokens=7, action="fetch(1)", result="ok")


def by_name(spans: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for s in spans:
        out.setdefault(s["name"], []).append(s)
    return out


def finals(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for s in spans if s["attrs"].get("logfire.span_type") == "span"]


def test_a_task_is_a_trace_of_attempts_over_real_otlp_http(ledger, clock, ledger_path, receiver) -> None:
    story(ledger, clock)
    finished, pending = export_once(ledger_path, exporter_for(receiver.endpoint))
    spans = receiver.wait_for(lambda s: len(s) >= finished + pending)
    assert (finished, pending) == (6, 2)  # t1: workflow + 5 attempts; t2: its workflow and its attempt, running
    named = by_name(finals(spans))
    wf = named["invoke_workflow research"][0]
    assert wf["parent_id"] is None
    assert wf["attrs"]["gen_ai.operation.name"] == "invoke_workflow"
    assert wf["attrs"]["gen_ai.workflow.name"] == "research"
    assert wf["attrs"]["gen_ai.conversation.id"] == "t1"
    assert wf["status"]["code"] == 1 and wf["attrs"]["warden.outcome"] == "completed"
    assert wf["resource"]["service.name"] == "warden" and wf["scope"] == "warden"

    plans = sorted(named["invoke_agent plan"], key=lambda s: s["attrs"]["warden.attempt"])
    searches = sorted(named["execute_tool search"], key=lambda s: s["attrs"]["warden.attempt"])
    assert [s["attrs"]["warden.attempt"] for s in plans] == [1, 2]
    assert [s["attrs"]["warden.attempt"] for s in searches] == [1, 2, 3]
    for s in plans + searches:
        assert s["trace_id"] == wf["trace_id"] and s["parent_id"] == wf["span_id"]
    first = plans[0]
    assert first["attrs"]["gen_ai.operation.name"] == "invoke_agent"
    assert first["attrs"]["gen_ai.agent.name"] == "plan"
    assert first["attrs"]["gen_ai.usage.input_tokens"] == 420  # heartbeat 120 + commit 300
    assert (first["end"] - first["start"]) == 5_000_000_000  # claimed → committed, on the ledger's clock
    beat = [e for e in first["events"] if e["name"] == "heartbeat"][0]
    assert beat["attrs"]["warden.action"] == "think()"
    assert beat["attrs"]["warden.result"] == HOSTILE  # literal: a trace UI is no terminal; nothing is lost
    assert beat["attrs"]["warden.tokens"] == 120

    tool = searches[0]
    assert tool["attrs"]["gen_ai.operation.name"] == "execute_tool"
    assert tool["attrs"]["gen_ai.tool.name"] == "search"
    assert tool["status"] == {"code": 2, "message": "timeout from the search API"}
    assert tool["attrs"]["error.type"] == "failed"
    # the retry links to the failed attempt; the handoff and the operator's rewind are its events
    blocked = searches[1]
    assert blocked["links"] == [{"trace_id": wf["trace_id"], "span_id": tool["span_id"],
                                 "attrs": {"warden.link.reason": "retry", "warden.previous_attempt": 1}}]
    events = {e["name"]: e["attrs"] for e in blocked["events"]}
    assert events["handoff.opened"]["warden.kind"] == "permission"
    assert events["operator.rewind"]["warden.operator"] == "alice"
    assert events["operator.rewind"]["warden.reason"] == "the plan missed the brief"
    assert blocked["attrs"]["warden.outcome"] == "rewound"
    # the rewind is a link from the next attempt to the one rewound, with who and why
    rewound = plans[1]["links"][0]
    assert rewound["span_id"] == plans[0]["span_id"]
    assert rewound["attrs"] == {"warden.link.reason": "rewind", "warden.previous_attempt": 1,
                                "warden.operator": "alice", "warden.reason": "the plan missed the brief"}


def test_running_work_is_a_pending_span_in_logfires_shape(ledger, clock, ledger_path, receiver) -> None:
    story(ledger, clock)
    export_once(ledger_path, exporter_for(receiver.endpoint))
    spans = receiver.wait_for(lambda s: len(s) >= 8)
    pending = [s for s in spans if s["attrs"].get("logfire.span_type") == "pending_span"]
    assert sorted(s["name"] for s in pending) == ["execute_tool fetch", "invoke_workflow crawl"]
    wf = next(s for s in pending if s["name"] == "invoke_workflow crawl")
    fetch = next(s for s in pending if s["name"] == "execute_tool fetch")
    # a pending span is a zero-length child of the real span (whose id it names as its parent) …
    assert fetch["start"] == fetch["end"]
    assert fetch["attrs"]["logfire.pending_parent_id"] == wf["parent_id"]  # the real span's parent: the workflow
    assert wf["attrs"]["logfire.pending_parent_id"] == "0000000000000000"  # the workflow is a root
    assert wf["parent_id"] == _workflow_id(spans, "crawl")


def _workflow_id(spans: list[dict[str, Any]], workflow: str) -> str:
    """The id the workflow's real span will have (its pending span's parent), never sent while it runs."""
    pend = next(s for s in spans if s["name"] == f"invoke_workflow {workflow}")
    assert not any(s["span_id"] == pend["parent_id"] for s in spans)
    return str(pend["parent_id"])


def test_the_real_span_replaces_the_pending_one_and_follow_resumes(ledger, clock, ledger_path, receiver,
                                                                   tmp_path) -> None:
    ledger.create_task("t", workflow="wf")
    ledger.add_node("t", "a", kind="agent")
    state = StateFile(tmp_path / "otel.json")
    f = Follower(ledger_path, exporter_for(receiver.endpoint), state, fallback_poll_s=0.2)
    f.begin()
    f.step()
    receiver.wait_for(lambda s: any(x["name"] == "invoke_workflow wf" for x in s))
    c = ledger.claim("t", "w", lease_s=600)
    f.step()
    spans = receiver.wait_for(lambda s: any(x["name"] == "invoke_agent a" for x in s))
    pend = [x for x in spans if x["name"] == "invoke_agent a"]
    assert [x["attrs"]["logfire.span_type"] for x in pend] == ["pending_span"]
    real_id = pend[0]["parent_id"]
    f.feed.close()

    # a restart: the cursor and the open attempt come back from the state file
    ledger.heartbeat(c, tokens=40, action="step 1", result="found 3")
    clock.advance(4)
    ledger.commit(c, output="done", tokens=2)
    again = Follower(ledger_path, exporter_for(receiver.endpoint), state, fallback_poll_s=0.2)
    again.begin()
    again.step()
    spans = receiver.wait_for(lambda s: any(x["name"] == "invoke_workflow wf" and x["attrs"]["logfire.span_type"] == "span"
                                            for x in s))
    real = [x for x in spans if x["name"] == "invoke_agent a" and x["attrs"]["logfire.span_type"] == "span"]
    assert len(real) == 1 and real[0]["span_id"] == real_id
    assert real[0]["attrs"]["gen_ai.usage.input_tokens"] == 42
    assert [e["attrs"]["warden.result"] for e in real[0]["events"]] == ["found 3"]
    assert real[0]["end"] - real[0]["start"] == 4_000_000_000
    seen = len(receiver.spans)
    again.step()  # nothing new: nothing sent
    assert len(receiver.spans) == seen
    again.feed.close()


def test_a_refused_batch_is_sent_again_with_the_same_ids(ledger, clock, ledger_path, receiver, tmp_path) -> None:
    ledger.create_task("t", workflow="wf")
    ledger.add_node("t", "a", kind="tool")
    state = StateFile(tmp_path / "otel.json")
    f = Follower(ledger_path, exporter_for(receiver.endpoint, timeout_s=5), state, fallback_poll_s=0.2)
    f.begin()
    f.step()
    cursor = f.mapper.cursor
    receiver.wait_for(lambda s: len(s) == 1)
    ledger.commit(ledger.claim("t", "w", lease_s=600), output=1)  # the task completes
    receiver.fail(1, status=400)
    said: list[str] = []
    f.say = said.append
    assert f.step() > 0  # it waits before trying again
    assert f.mapper.cursor == cursor and receiver.requests == 2 and len(receiver.spans) == 1
    assert "did not take" in said[-1] and "400" in said[-1]
    f.step()
    spans = receiver.wait_for(lambda s: len(s) == 3)
    assert {x["name"] for x in spans[1:]} == {"execute_tool a", "invoke_workflow wf"}
    assert spans[2]["span_id"] == spans[0]["parent_id"] or spans[1]["span_id"] == spans[0]["parent_id"]
    f.feed.close()


def test_exporting_twice_sends_the_same_spans(ledger, clock, ledger_path, receiver) -> None:
    story(ledger, clock)
    export_once(ledger_path, exporter_for(receiver.endpoint))
    first = receiver.wait_for(lambda s: len(s) == 8)
    export_once(ledger_path, exporter_for(receiver.endpoint))
    both = receiver.wait_for(lambda s: len(s) == 16)

    def key(s: dict[str, Any]) -> tuple[Any, ...]:
        return (s["trace_id"], s["span_id"], s["parent_id"], s["start"], s["end"], repr(s["attrs"]),
                repr(s["events"]), repr(s["links"]), s["resource"].get("service.instance.id"))

    assert sorted(map(key, first)) == sorted(map(key, both[8:]))
    assert len({(s["trace_id"], s["span_id"]) for s in first}) == 8
    assert len({s["trace_id"] for s in first}) == 2


def test_attribute_names_are_the_genai_conventions(ledger, clock, ledger_path, receiver) -> None:
    story(ledger, clock)
    export_once(ledger_path, exporter_for(receiver.endpoint))
    spans = receiver.wait_for(lambda s: len(s) == 8)
    used = {k for s in spans for k in s["attrs"]}
    names = {k for k in used if k.startswith("gen_ai.")}
    assert names == {"gen_ai.operation.name", "gen_ai.workflow.name", "gen_ai.conversation.id", "gen_ai.agent.name",
                     "gen_ai.agent.id", "gen_ai.tool.name", "gen_ai.tool.call.id", "gen_ai.usage.input_tokens"}
    assert names <= GENAI_NAMES, names - GENAI_NAMES
    assert {s["attrs"]["gen_ai.operation.name"] for s in spans} <= OPERATIONS
    assert error_attributes.ERROR_TYPE in used
    # every other attribute is ours (warden.*) or Logfire's pending-span shape
    assert all(k.startswith(("gen_ai.", "warden.", "logfire.")) or k == "error.type" for k in used)
    for s in spans:
        op = s["attrs"]["gen_ai.operation.name"]
        target = {"invoke_agent": "gen_ai.agent.name", "execute_tool": "gen_ai.tool.name",
                  "invoke_workflow": "gen_ai.workflow.name"}[op]
        assert s["name"] == f"{op} {s['attrs'][target]}"  # the conventions' span name: "{operation} {name}"


def test_agent_text_is_sent_literally_and_cut_at_the_bound(ledger, clock, ledger_path, receiver) -> None:
    ledger.create_task("t", workflow=HOSTILE)
    ledger.add_node("t", "a", kind="tool")
    c = ledger.claim("t", "w", lease_s=600)
    ledger.heartbeat(c, action="x" * 5000, result=HOSTILE)
    ledger.commit(c, output=1)
    export_once(ledger_path, exporter_for(receiver.endpoint))
    spans = receiver.wait_for(lambda s: len(s) == 2)
    wf = next(s for s in spans if s["attrs"]["gen_ai.operation.name"] == "invoke_workflow")
    assert wf["name"] == f"invoke_workflow {HOSTILE}" and wf["attrs"]["gen_ai.workflow.name"] == HOSTILE
    tool = next(s for s in spans if s["attrs"]["gen_ai.operation.name"] == "execute_tool")
    beat = tool["events"][0]["attrs"]
    assert beat["warden.result"] == HOSTILE
    assert beat["warden.action"] == ledger.events(0, task_id="t")[-3].payload["action"]  # as the journal keeps it
    assert len(value("é" * 5000)) == MAX_VALUE and value("é" * 5000).endswith("…")


def cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    e.update(env or {})
    e["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "console", *argv], capture_output=True, text=True, env=e,
                          timeout=120, cwd=ROOT)


def test_the_cli_sends_to_the_endpoint_or_says_why_not(ledger, clock, ledger_path, receiver) -> None:
    story(ledger, clock)
    ledger.close()
    p = cli("otel", "export", "--ledger", ledger_path, "--endpoint", receiver.endpoint)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("sent 6 finished spans and 2 pending")
    receiver.wait_for(lambda s: len(s) == 8)
    p = cli("otel", "export", "--ledger", ledger_path, env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint})
    assert p.returncode == 0, p.stderr
    receiver.wait_for(lambda s: len(s) == 16)
    for argv, env, says in (
        (("--endpoint", "ftp://x"), {}, "--endpoint must be an http:// or https:// URL"),
        ((), {}, "give --endpoint URL or set OTEL_EXPORTER_OTLP_ENDPOINT"),
    ):
        p = cli("otel", "export", "--ledger", ledger_path, *argv, env=env)
        assert p.returncode == 2 and says in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    receiver.fail(1, status=400)
    p = cli("otel", "export", "--ledger", ledger_path, "--endpoint", receiver.endpoint)
    assert p.returncode == 1 and "the collector did not take" in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_follow_keeps_its_state_beside_a_sqlite_ledger(tmp_path) -> None:
    assert state_path(str(tmp_path / "l.db")) == tmp_path / "l.db.otel.json"
    pg = state_path("postgresql://u:secret@db/warden", env={"XDG_STATE_HOME": str(tmp_path)})
    assert pg.parent == tmp_path / "warden" and "secret" not in pg.name
    one, two = StateFile(tmp_path / "s.json"), StateFile(tmp_path / "s.json")
    assert one.hold() and not two.hold()
    one.release()
    assert two.hold()
    two.release()
