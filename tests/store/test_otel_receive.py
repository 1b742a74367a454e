"""`warden otel receive`: GenAI spans from an agent nobody changed become a task, nodes and observations.

The spans are made by the OpenTelemetry SDK in the test itself, in the shapes instrumented agents
send — the GenAI semantic conventions (the OpenAI Agents SDK's and Logfire's GenAI spans),
OpenInference's (``openinference.span.kind``, ``input.value``/``output.value``), Logfire's pending
span — and sent by the SDK's own OTLP/HTTP exporter (protobuf) to the receiver on 127.0.0.1; OTLP/JSON
is posted by hand in its wire shape.
"""

from __future__ import annotations

import gzip
import json
import threading
import urllib.error
import urllib.request
from typing import Any, Iterator

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http",
                    reason="warden otel needs the otel extra: pip install 'warden[otel]'")

from opentelemetry import trace  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402

from store import Ledger  # noqa: E402
from store.adapters.otel.receive import MAX_BODY, Intake, make_server  # noqa: E402
from store.reading.signals import signals_for_task  # noqa: E402

HOSTILE = "\x1b]52;c;aGk=\x07\x1b[2J[bold]boom[/bold]\u202e"


@pytest.fixture
def server(ledger_path) -> Iterator[tuple[Any, Ledger]]:
    led = Ledger.open(ledger_path)
    srv = make_server(Intake(led), "127.0.0.1", 0, None)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield srv, led
    srv.shutdown()
    srv.server_close()
    led.close()


def url(srv: Any) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}/v1/traces"


def tracer(srv: Any) -> tuple[trace.Tracer, TracerProvider]:
    """An instrumented agent's tracer: each span sent as it ends, by the SDK's OTLP/HTTP exporter."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=url(srv), timeout=10)))
    return provider.get_tracer("agent"), provider


def only_task(led: Ledger) -> Any:
    tasks = [t for t in led.tasks() if t.origin == "otel"]
    assert len(tasks) == 1, tasks
    return tasks[0]


def test_genai_spans_become_a_running_agent_with_observations_and_stall_signals(server) -> None:
    srv, led = server
    tr, provider = tracer(srv)
    with tr.start_as_current_span("invoke_agent Researcher", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "Researcher"}) as agent:
        with tr.start_as_current_span("chat gpt-4o", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 900, "gen_ai.usage.output_tokens": 100}):
            pass
        for _ in range(4):  # the same call, the same nothing: a loop a person should see
            with tr.start_as_current_span("execute_tool search", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                    "gen_ai.tool.call.arguments": '{"q": "moth index v2"}',
                    "gen_ai.tool.call.result": "0 results"}):
                pass
        # the agent still runs: its node is running, its steps are observations, its tokens counted
        task = only_task(led)
        key = f"agent-{agent.get_span_context().span_id:016x}"
        node = led.node(task.task_id, key)
        assert node.status == "running" and node.kind == "agent"
        obs = led.observations(task.task_id, key)
        actions = [o.action for o in obs]
        assert actions.count('search({"q": "moth index v2"})') == 4 and "chat gpt-4o" in actions
        assert {o.result for o in obs if o.action and o.action.startswith("search")} == {"0 results"}
        assert led.task(task.task_id).tokens_used == 1000
        kinds = {s.kind for s in signals_for_task(led, led.task(task.task_id))}
        assert kinds & {"repeating", "no_new_info"}, kinds
    provider.shutdown()
    node = led.node(task.task_id, key)
    assert node.status == "succeeded" and node.output == {"agent": "Researcher"}
    assert led.task(task.task_id).status == "completed"
    assert task.task_id == f"otel-{agent.get_span_context().trace_id:032x}"[:21]


def test_openinference_shape_and_a_failed_tool(server) -> None:
    srv, led = server
    tr, provider = tracer(srv)
    with tr.start_as_current_span("Agent", attributes={"openinference.span.kind": "AGENT"}) as agent:
        with tr.start_as_current_span("ChatOpenAI", attributes={
                "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini", "llm.token_count.total": 321}):
            pass
        with tr.start_as_current_span("fetch", attributes={
                "openinference.span.kind": "TOOL", "tool.name": "fetch", "input.value": "https://example.com",
                "output.value": HOSTILE}) as tool:
            tool.set_status(trace.Status(trace.StatusCode.ERROR, "HTTP 503"))
        agent.set_status(trace.Status(trace.StatusCode.ERROR, HOSTILE))
    provider.shutdown()
    task = only_task(led)
    key = f"agent-{agent.get_span_context().span_id:016x}"
    obs = led.observations(task.task_id, key)
    assert [o.action for o in obs] == ["chat gpt-4o-mini", "fetch(https://example.com)"]
    assert obs[1].result == "error: HTTP 503"
    node = led.node(task.task_id, key)
    assert node.status == "failed" and node.error == HOSTILE  # kept literally; the console shows it safely
    assert led.task(task.task_id).tokens_used == 321


def test_a_logfire_pending_span_starts_the_agent_before_anything_ends(server) -> None:
    srv, led = server
    tr, provider = tracer(srv)
    real = tr.start_span("invoke_agent Planner", attributes={"gen_ai.operation.name": "invoke_agent",
                                                             "gen_ai.agent.name": "Planner"})
    ctx = trace.set_span_in_context(real)
    tr.start_span("invoke_agent Planner", context=ctx, attributes={
        "gen_ai.operation.name": "invoke_agent", "logfire.span_type": "pending_span",
        "logfire.pending_parent_id": "0000000000000000"}).end()
    task = only_task(led)
    key = f"agent-{real.get_span_context().span_id:016x}"
    assert led.node(task.task_id, key).status == "running"
    real.end()
    provider.shutdown()
    assert led.node(task.task_id, key).status == "succeeded"
    assert len(led.graph(task.task_id).nodes) == 1  # the pending span and the real one: one node


def post(srv: Any, body: bytes, kind: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url(srv), data=body, method="POST",
                                 headers={"Content-Type": kind, **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def json_request(trace_id: str, spans: list[dict[str, Any]]) -> bytes:
    return json.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "x"},
                       "spans": [{"traceId": trace_id, **s} for s in spans]}]}]}).encode()


def sv(v: str) -> dict[str, Any]:
    return {"stringValue": v}


def test_otlp_json_and_gzip(server) -> None:
    srv, led = server
    tid = "5b8efff798038103d269b633813fc60c"
    body = json_request(tid, [
        {"spanId": "eee19b7ec3c1b174", "parentSpanId": "eee19b7ec3c1b173", "name": "execute_tool grep",
         "attributes": [{"key": "gen_ai.operation.name", "value": sv("execute_tool")},
                        {"key": "gen_ai.tool.name", "value": sv("grep")},
                        {"key": "gen_ai.tool.call.arguments", "value": sv("TODO")},
                        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "12"}}]},
        {"spanId": "eee19b7ec3c1b173", "name": "invoke_agent Coder",
         "attributes": [{"key": "gen_ai.operation.name", "value": sv("invoke_agent")},
                        {"key": "gen_ai.agent.name", "value": sv("Coder")}]},
    ])
    status, _ = post(srv, gzip.compress(body), "application/json", {"Content-Encoding": "gzip"})
    assert status == 200
    node = led.node(f"otel-{tid[:16]}", "agent-eee19b7ec3c1b173")
    assert node.status == "succeeded" and node.title == "Coder" and node.output == {"agent": "Coder"}
    assert [o.action for o in led.observations(f"otel-{tid[:16]}", node.key)] == ["grep(TODO)"]
    assert led.task(f"otel-{tid[:16]}").tokens_used == 12


def test_a_batch_sent_twice_is_taken_once(server) -> None:
    srv, led = server
    tid = "5b8efff798038103d269b633813fc60e"
    tool = {"spanId": "eee19b7ec3c1b175", "parentSpanId": "eee19b7ec3c1b170", "name": "execute_tool ls",
            "attributes": [{"key": "gen_ai.operation.name", "value": sv("execute_tool")},
                           {"key": "gen_ai.tool.name", "value": sv("ls")}]}
    for _ in range(3):  # an exporter whose answer was lost sends the same batch again
        assert post(srv, json_request(tid, [tool]), "application/json")[0] == 200
    obs = led.observations(f"otel-{tid[:16]}", "agent-eee19b7ec3c1b170")
    assert [o.action for o in obs] == ["ls()"]


def test_bad_requests_are_refused_and_change_nothing(ledger_path) -> None:
    led = Ledger.open(ledger_path)
    srv = make_server(Intake(led), "127.0.0.1", 0, "s3cret-token-0123456789")
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    auth = {"Authorization": "Bearer s3cret-token-0123456789"}
    try:
        ok = json_request("5b8efff798038103d269b633813fc60c", [{"spanId": "eee19b7ec3c1b173", "name": "invoke_agent A",
                          "attributes": [{"key": "gen_ai.operation.name", "value": sv("invoke_agent")}]}])
        assert post(srv, ok, "application/json")[0] == 401
        assert post(srv, ok, "application/json", {"Authorization": "Bearer wrong"})[0] == 401
        assert post(srv, b"\xff\x00garbage", "application/x-protobuf", auth)[0] == 400
        assert post(srv, b"{not json", "application/json", auth)[0] == 400
        assert post(srv, ok, "text/plain", auth)[0] == 415
        bomb = gzip.compress(b"\x00" * (17 * 1024 * 1024))  # inflates past the bound
        assert post(srv, bomb, "application/x-protobuf", {**auth, "Content-Encoding": "gzip"})[0] == 413
        try:  # refused before it is read: the answer, or a connection closed under the sender
            assert post(srv, b"x" * (MAX_BODY + 1), "application/x-protobuf", auth)[0] == 413
        except urllib.error.URLError as e:
            assert isinstance(e.reason, (BrokenPipeError, ConnectionResetError)), e
        assert led.tasks() == []
        assert post(srv, ok, "application/json", auth)[0] == 200
        assert len(led.tasks()) == 1
    finally:
        srv.shutdown()
        srv.server_close()
        led.close()


def test_parking_a_watched_agent_says_it_cannot_stop_it(server) -> None:
    srv, led = server
    tr, provider = tracer(srv)
    real = tr.start_span("invoke_agent Planner", attributes={"gen_ai.operation.name": "invoke_agent"})
    tr.start_span("invoke_agent Planner", context=trace.set_span_in_context(real), attributes={
        "gen_ai.operation.name": "invoke_agent", "logfire.span_type": "pending_span"}).end()
    task = only_task(led)
    plan = led.plan_park(task.task_id, reason="too slow")
    assert any("needs a controlling integration" in w for w in plan.warnings), plan.warnings
    real.end()
    provider.shutdown()


def test_the_cli_listens_on_loopback_and_refuses_elsewhere_without_a_token(ledger_path, tmp_path) -> None:
    import os
    import signal
    import socket
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "WARDEN_OTEL_TOKEN"}
    env["PYTHONPATH"] = str(root)
    env["XDG_STATE_HOME"] = str(tmp_path / "state")  # a PostgreSQL ledger's receiver state goes there
    base = [sys.executable, "-m", "console", "otel", "receive", "--ledger", ledger_path]
    p = subprocess.run([*base, "--host", "0.0.0.0"], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 2 and "without a token" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([*base, "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert f"http://127.0.0.1:{port}/v1/traces" in line, (line, proc.stderr.read() if proc.stderr else "")
        body = json_request("5b8efff798038103d269b633813fc60d", [{"spanId": "eee19b7ec3c1b173", "name": "invoke_agent A",
                            "attributes": [{"key": "gen_ai.operation.name", "value": sv("invoke_agent")}]}])
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/traces", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.status == 200
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and "stopped" in out and "Traceback" not in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with Ledger.open(ledger_path) as led:
        assert [t.origin for t in led.tasks()] == ["otel"]
