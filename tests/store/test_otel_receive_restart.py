"""`warden otel receive` restarted mid-trace (``kill -9``) goes on with the same nodes.

The receiver holds the lease of each agent node it watches; its claims, span owners and the spans
it has written are kept in a state file beside the ledger (store/adapters/otel/intake_state.py).
Killed while the agent runs and started again, the agent's next spans are written to the same node
and its end commits it: one task, one node, one attempt, every tool call once. On both backends
(a PostgreSQL ledger keeps its state file under ``$XDG_STATE_HOME``, here the test's directory).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http",
                    reason="warden otel needs the otel extra: pip install 'warden[otel]'")

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402

from store import Ledger  # noqa: E402
from store.adapters.otel.intake_state import IntakeState, state_path  # noqa: E402
from store.adapters.otel.receive import Intake, decode_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TRACE = "5b8efff798038103d269b633813fc61d"
AGENT = "aaa19b7ec3c1b173"


class Receiver:
    """``warden otel receive`` as an operator starts it (a process of its own, the repository on
    PYTHONPATH as the suite's subprocesses have it)."""

    def __init__(self, ledger: str, port: int, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "console", "otel", "receive", "--ledger", ledger,
                                      "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env, cwd=str(ROOT))
        line = self.proc.stdout.readline() if self.proc.stdout else ""  # printed once it listens
        assert f"127.0.0.1:{port}/v1/traces" in line, (line, self.proc.stderr.read() if self.proc.stderr else "")

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(60)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k != "WARDEN_OTEL_TOKEN"}
    e["PYTHONPATH"] = str(ROOT)
    e["XDG_STATE_HOME"] = str(tmp_path / "state")
    return e


@pytest.fixture
def port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def receivers(ledger_path: str, port: int, env: dict[str, str]):
    started: list[Receiver] = []

    def start() -> Receiver:
        r = Receiver(ledger_path, port, env)
        started.append(r)
        return r

    yield start
    for r in started:
        r.stop()


def tool(tr: Any, q: str) -> None:
    with tr.start_as_current_span("execute_tool search", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
            "gen_ai.tool.call.arguments": json.dumps({"q": q}), "gen_ai.tool.call.result": f"3 results for {q}"}):
        pass


def actions(led: Ledger, task: str) -> list[str]:
    return [o.action for n in led.graph(task).nodes for o in led.observations(task, n.key) if o.action]


def test_killed_mid_trace_and_started_again_the_next_spans_commit_the_same_node(ledger_path, port, receivers, env):
    first = receivers()
    provider = TracerProvider()  # each span sent as it ends (the call returns once it was answered)
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(
        endpoint=f"http://127.0.0.1:{port}/v1/traces", timeout=30)))
    tr = provider.get_tracer("agent")
    try:
        with tr.start_as_current_span("invoke_agent Researcher", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "Researcher"}):
            tool(tr, "one")
            tool(tr, "two")
            with Ledger.open(ledger_path) as led:
                (task,) = [t.task_id for t in led.tasks() if t.origin == "otel"]
                assert len(actions(led, task)) == 2
            first.kill9()  # mid-trace: the agent goes on, its node still running under our lease
            receivers()
            tool(tr, "three")
            tool(tr, "four")
    finally:
        provider.shutdown()
    with Ledger.open(ledger_path) as led:
        assert [t.task_id for t in led.tasks() if t.origin == "otel"] == [task]  # one task
        nodes = led.graph(task).nodes
        assert [(n.kind, n.status, n.attempt) for n in nodes] == [("agent", "succeeded", 1)], nodes
        assert actions(led, task) == [f'search({{"q": "{q}"}})' for q in ("one", "two", "three", "four")]
        assert [e.kind for e in led.events(task_id=task)].count("node.committed") == 1


def test_a_batch_sent_again_after_a_restart_is_not_written_twice(ledger_path, port, receivers, env, tmp_path):
    body = json.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "x"},
        "spans": [{"traceId": TRACE, "spanId": "bbb19b7ec3c1b174", "parentSpanId": AGENT, "name": "execute_tool grep",
                   "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                                  {"key": "gen_ai.tool.name", "value": {"stringValue": "grep"}}]}]}]}]}).encode()

    def post(data: bytes) -> int:
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/traces", data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return int(r.status)

    first = receivers()
    assert post(body) == 200
    first.kill9()  # as if killed before its answer reached the exporter: the batch comes again
    with open(state_path(ledger_path, env), "ab") as f:
        f.write(b'{"seen":["torn by a kill')  # a line cut short by a kill mid-write is ignored
    receivers()
    assert post(body) == 200
    assert post(body.replace(b"bbb19b7ec3c1b174", b"bbb19b7ec3c1b175").replace(b'"grep"', b'"find"')) == 200
    with Ledger.open(ledger_path) as led:
        (task,) = [t.task_id for t in led.tasks() if t.origin == "otel"]
        assert actions(led, task) == ["grep()", "find()"]  # the batch sent again: written once
        assert [(n.status, n.attempt) for n in led.graph(task).nodes] == [("running", 1)]


def test_one_receiver_per_ledger_the_second_says_why_in_one_line(ledger_path, port, receivers, env):
    receivers()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        other = s.getsockname()[1]
    p = subprocess.run([sys.executable, "-m", "console", "otel", "receive", "--ledger", ledger_path,
                        "--port", str(other)], capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=120)
    assert p.returncode == 1 and "another warden otel receive keeps this ledger's claims" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def spans(*items: dict[str, Any]) -> list[Any]:
    return decode_json(json.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [
        {"scope": {"name": "x"}, "spans": [{"traceId": TRACE, **s} for s in items]}]}]}).encode())


TOOL = {"spanId": "ccc19b7ec3c1b174", "parentSpanId": AGENT, "name": "execute_tool grep",
        "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                       {"key": "gen_ai.tool.name", "value": {"stringValue": "grep"}}]}
END = {"spanId": AGENT, "name": "invoke_agent Coder",
       "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}]}


def test_an_end_the_state_file_missed_is_not_written_twice(ledger_path, tmp_path):
    """Killed after the agent's commit and before its line: the next receiver reads a claim whose
    node has ended — dropped at start (the ledger is the truth) — and the end sent again writes
    nothing."""
    path = tmp_path / "intake.log"
    with Ledger.open(ledger_path) as led:
        st = IntakeState(path)
        st.open(led)
        Intake(led, st).take(spans(TOOL))
        before = path.read_bytes()
        Intake(led, st).take(spans(END))
        st.close()
        path.write_bytes(before)  # the file as the kill left it: the end not noted
        st2 = IntakeState(path)
        st2.open(led)
        assert st2.claims == {}  # its node succeeded: not ours any more
        Intake(led, st2).take(spans(END))  # the exporter sends the end again
        st2.close()
        (task,) = [t.task_id for t in led.tasks() if t.origin == "otel"]
        assert [e.kind for e in led.events(task_id=task)].count("node.committed") == 1
        assert [(n.status, n.attempt) for n in led.graph(task).nodes] == [("succeeded", 1)]


def test_a_claim_kept_in_the_file_is_written_through_after_a_restart_in_process(ledger_path, tmp_path):
    path = tmp_path / "intake.log"
    with Ledger.open(ledger_path) as led:
        st = IntakeState(path)
        st.open(led)
        Intake(led, st).take(spans(TOOL))
        st.close()  # (a kill: nothing more is written)
        st2 = IntakeState(path)
        st2.open(led)
        assert list(st2.claims) == [(f"otel-{TRACE[:16]}", f"agent-{AGENT}")]
        Intake(led, st2).take(spans(TOOL, END))  # the tool span again (not twice), then the end
        st2.close()
        task = f"otel-{TRACE[:16]}"
        assert actions(led, task) == ["grep()"]
        assert [(n.status, n.attempt) for n in led.graph(task).nodes] == [("succeeded", 1)]
    assert oct(path.stat().st_mode & 0o777) == "0o600"
