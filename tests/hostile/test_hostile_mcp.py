"""``warden mcp`` under hostile clients: every call gets an answer, every refusal its reason.

A real ``warden mcp`` process is driven over stdio by a raw JSON-RPC client (tests/hostile/rawmcp.py):
what the SDK's client cannot send — a lone surrogate escape, invalid UTF-8, a line nested 100,000
deep, a batch, an id of the wrong type, a 5 MB line — is sent as bytes. Each case asserts:

- an answer within :data:`rawmcp.ANSWER_S` for its id (id null when it had none that can be one);
- a refusal is one escaped line (``assert_one_clear_line``) and changes nothing in the ledger (its
  last event, the claimed node's figures and observations);
- every answer is strict JSON (UTF-8, no lone surrogate even escaped), the server lives on, writes
  no traceback, and its memory stays bounded.

The corpus is generated per run from fixed seeds, from the tools' own input schemas (``tools/list``):
a tool or an argument added later is covered without a line here.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("mcp")

from store import Ledger  # noqa: E402
from store.adapters.mcp_wire import DEPTH_MAX, MESSAGE_MAX  # noqa: E402
from store.validate import COUNT_MAX  # noqa: E402
from tests.support.asks import MCP_PARTS  # noqa: E402
from tests.hostile.hostile_support import assert_one_clear_line, hostile_text  # noqa: E402
from tests.hostile.rawmcp import RawMcp  # noqa: E402

SEEDS = (11, 29)
RSS_MAX_MB = 250.0  # the server's peak resident memory after the whole corpus (a 5 MB line included)
TASK = "t"


class World:
    """A ledger, a server claimed on it, and what a refusal must leave alone."""

    def __init__(self, tmp_path: Path) -> None:
        self.path = str(tmp_path / "l.db")
        with Ledger.open(self.path) as led:
            led.create_task(TASK, title="hostile", constraints=["keep calm"])
            led.add_node(TASK, "n0", kind="agent", max_claims=COUNT_MAX)
        self.nodes = 1
        self.mcp = RawMcp(self.path, tmp_path / "sessions", "--task", TASK, "--worker", "w", "--lease", "3600",
                          "--ask-wait", "0.2", stderr_path=tmp_path / "mcp.stderr")
        self.reader = Ledger.open(self.path, read_only=True)
        self.mcp.initialize()
        got = self.mcp.ok("claim_next")
        assert got["status"] == "claimed", got
        self.node = got["node"]

    def fingerprint(self) -> tuple[Any, ...]:
        n = self.reader.node(TASK, self.node)
        return (self.reader.last_event_id(), n.status, n.attempt, n.tokens_used, n.units_done,
                json.dumps(n.output, sort_keys=True), len(self.reader.observations(TASK, self.node, limit=10_000)),
                len(self.reader.effects(TASK)), len(self.reader.handoffs(status=None, task_id=TASK)))

    def keep_claimed(self, answer: dict[str, Any]) -> None:
        """After an accepted call: bring the session back to a running claim (a commit or a
        failure ends it; a question asked waits for a person: answered here)."""
        status = answer.get("status")
        if status in ("pending", "waiting_for_human"):
            hid = str(answer["handoff"])
            h = self.reader.handoff(hid)
            option = h.options[0]["id"] if h.options else None
            with Ledger.open(self.path) as led:
                led.apply(led.plan_resolve(hid, option=option, answer="go on"), operator="op@test")
            status = self.mcp.ok("wait_for_human", handoff=hid).get("status")
        if status not in ("claimed", "ok", "answered", "intended", "confirmed", "none"):
            with Ledger.open(self.path) as led:
                if led.node(TASK, self.node).status == "failed":  # for good: the task stops; the operator rewinds it
                    led.apply(led.plan_rewind(TASK, self.node, reason="the corpus goes on"), operator="op@test")
                else:
                    led.add_node(TASK, f"n{self.nodes}", kind="agent", max_claims=COUNT_MAX)
                    self.nodes += 1
            got = self.mcp.ok("claim_next")
            assert got["status"] == "claimed", got
            self.node = got["node"]

    def close(self) -> None:
        self.reader.close()


# One server for the module (starting one costs ~2 s of CPU: the SDK's imports); its end is checked
# once all the cases ran: alive until its input closed, exit 0, no traceback, memory bounded.
pytestmark = pytest.mark.xdist_group("hostile_mcp")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    w = World(tmp_path_factory.mktemp("mcp"))
    try:
        yield w
        assert w.mcp.proc.poll() is None, "the server died"
        assert w.mcp.peak_rss_mb() < RSS_MAX_MB, f"peak RSS {w.mcp.peak_rss_mb():.0f} MB"
        assert w.mcp.close() == 0
        err = w.mcp.stderr()
        assert "Traceback" not in err and "Error executing" not in err, err[-3000:]
    finally:
        w.mcp.kill()
        w.close()


@pytest.fixture(autouse=True)
def quiet_stderr(world: World) -> Iterator[None]:
    """No traceback on the server's stderr from any one test's cases."""
    seen = len(world.mcp.stderr())
    yield
    err = world.mcp.stderr()[seen:]
    assert "Traceback" not in err and "Error executing" not in err, err[-3000:]


def refusal_text(result: dict[str, Any]) -> str:
    """The one line of a refused tools/call: a tool error's text, or a JSON-RPC error's message."""
    if "error" in result:
        return str(result["error"]["message"])
    assert result.get("isError") is True, result
    assert len(result["content"]) == 1 and result["content"][0]["type"] == "text", result
    return str(result["content"][0]["text"])


def check(world: World, tool: str, arguments: Any, *, must_refuse: bool = False, names: str | None = None) -> None:
    """One tools/call: answered; a refusal is one clear line and changed nothing; an acceptance
    is valid JSON and the session is brought back to a running claim."""
    before = world.fingerprint()
    result = world.mcp.call(tool, arguments)
    if "error" in result or result.get("isError"):
        line = refusal_text(result)
        assert_one_clear_line(line, names=names)
        assert world.fingerprint() == before, f"{tool}({str(arguments)[:120]}) was refused but changed the ledger"
        return
    assert not must_refuse, f"{tool}({str(arguments)[:120]}) was accepted: {result}"
    world.keep_claimed(json.loads(result["content"][0]["text"]))


def nested(depth: int, leaf: Any = 0, kind: str = "list") -> str:
    """JSON text nested ``depth`` deep (text: Python's own encoder recurses)."""
    if kind == "list":
        return "[" * depth + json.dumps(leaf) + "]" * depth
    return '{"a":' * depth + json.dumps(leaf) + "}" * depth


def call_line(rid: Any, tool: str, arguments_json: str) -> bytes:
    return ('{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"%s","arguments":%s}}'
            % (json.dumps(rid), tool, arguments_json)).encode()


# ---------------------------------------------------------------------- the cases of the report
STRING_ARGUMENTS = [("heartbeat", "observation"), ("heartbeat", "action"), ("heartbeat", "result"),
                    ("heartbeat", "waiting_on"), ("claim_next", "task"), ("fail", "error"), ("fail", "failure_class"),
                    ("ask_human", "question"), ("ask_human", "kind"), ("intend_effect", "key"),
                    ("confirm_effect", "key"), ("confirm_effect", "external_id"), ("wait_for_human", "handoff"),
                    ("commit", "output"), ("intend_effect", "payload")]
REQUIRED = {"fail": {"error": "x"}, "ask_human": {"question": "q", **MCP_PARTS}, "intend_effect": {"key": "k"},
            "confirm_effect": {"key": "k"}, "wait_for_human": {"handoff": "1"}, "commit": {"output": 1}}


def test_a_lone_surrogate_in_any_string_argument_is_answered_with_the_refusal(world: World) -> None:
    """``"a\\ud800b"`` is valid JSON that the SDK's reader refuses: the call used to get no answer."""
    for tool, arg in STRING_ARGUMENTS:
        for surrogate in ("\\ud800", "\\udfff", "\\udc00\\ud800"):
            args = {**REQUIRED.get(tool, {}), arg: "__S__"}
            text = json.dumps(args).replace('"__S__"', f'"a{surrogate}b"')
            before = world.fingerprint()
            rid = world.mcp.fresh_id()
            world.mcp.send_bytes(call_line(rid, tool, text))
            got = world.mcp.wait(rid)
            line = refusal_text(got["result"] if "result" in got else {"error": got["error"]})
            assert_one_clear_line(line)
            assert "surrogate" in line or surrogate[:6] in line, line  # the reason, or the value escaped
            assert line.startswith(f"Error executing tool {tool}: "), line
            assert world.fingerprint() == before


@pytest.mark.parametrize("depth", [65, 150, 300, 1000, 100_000])
def test_output_nested_deep_is_answered_and_refused(world: World, depth: int) -> None:
    for kind in ("list", "dict"):
        before = world.fingerprint()
        rid = world.mcp.fresh_id()
        world.mcp.send_bytes(call_line(rid, "commit", '{"output":%s}' % nested(depth, kind=kind)))
        got = world.mcp.wait(rid)
        line = refusal_text(got["result"])
        assert_one_clear_line(line, names="nested more than")
        assert line.startswith("Error executing tool commit: "), line
        assert world.fingerprint() == before
    assert world.mcp.ok("heartbeat", progress=0.5)["status"] == "ok"  # and the session goes on


@pytest.mark.parametrize("arguments,names", [
    ({"progress": 7}, "progress"), ({"progress": -0.5}, "progress"), ({"tokens": 10**400}, "tokens"),
    ({"tokens": -3}, "tokens"), ({"wait_s": 5}, "waiting_on"), ({"waiting_on": "a\nb", "wait_s": 5}, "waiting_on"),
    ({"waiting_on": "x", "wait_s": 10**9}, "wait_s"), ({"observation": "x", "progress": "lots"}, "progress"),
])
def test_a_heartbeat_refusal_keeps_its_reason(world: World, arguments: dict[str, Any], names: str) -> None:
    """The store's WardenError used to reach the client as ``Error executing tool heartbeat`` and a
    traceback on stderr (checked by the fixture)."""
    before = world.fingerprint()
    line = refusal_text(world.mcp.call("heartbeat", arguments))
    assert_one_clear_line(line, names=names)
    assert line.startswith("Error executing tool heartbeat: ") and len(line) > len("Error executing tool heartbeat: ") + 10
    assert world.fingerprint() == before


def test_claim_next_with_escapes_in_the_task_names_it_escaped(world: World) -> None:
    for task in ("\x1b[31mother\x1b[0m\n", "a\u202eb", "x" * 5000, "../../etc"):
        line = refusal_text(world.mcp.call("claim_next", {"task": task}))
        assert_one_clear_line(line)
        assert "Error executing tool claim_next: " in line and "\x1b" not in line


# ---------------------------------------------------------------------- the generated corpus
UNSAFE = ["\x00", "\x01", "\x07", "\x08", "\t", "\n", "\r", "\x1b", "\x1b[2J", "\x1b]52;c;cHduZWQ=\x07", "\x7f",
          "\x85", "\x9b", "\x9c", "\u061c", "\u200b", "\u200d", "\u200e", "\u202a", "\u202e", "\u2066", "\u2069",
          "\u2028", "\u2029", "\u2060", "\ufeff", "\ue000", "\U000e0041", "\ufffe", "\uffff", "\U0010ffff",
          "\u0378", "[bold]x[/]", "%s%n", "$(id)"]
WRONG_TYPES = [None, True, False, 0, -1, 1.5, 2**63, -(2**63) - 1, "", "7", [], [1], {}, {"a": 1}, [[[]]]]


def values_for(rng: random.Random, schema: dict[str, Any]) -> list[Any]:
    """Hostile values for one argument: every wrong type, huge and edge numbers, every class of
    unsafe character (each in one of a few strings, shuffled by the seed), random hostile text,
    huge text; and (as text, see :func:`deep_values`) deep nesting."""
    out: list[Any] = list(WRONG_TYPES)
    out += rng.sample([10**30, -(10**30), 1e308, -1e308, 5e-324, 0.999999999999, 1.0000000001], 3)
    chars = rng.sample(UNSAFE, len(UNSAFE))
    out += ["a" + "".join(chars[i::5]) + "b" for i in range(5)] + ["a\x00b", "a\u202eb"]
    out += [hostile_text(rng) for _ in range(2)]
    out += [rng.choice(["x" * 201, "x" * 4001, "x" * 70_000, "中" * 30_000]), [hostile_text(rng)] * 50,
            {hostile_text(rng, size=1)[:50] or "k": hostile_text(rng)}]
    return out


def deep_values(rng: random.Random) -> list[str]:
    return [nested(d, leaf=hostile_text(rng, size=1), kind=k) for d, k in
            ((65, "list"), (rng.choice([199, 250]), "dict"), (rng.choice([DEPTH_MAX + 1, 5000]), "list"))]


def tool_schemas(world: World) -> dict[str, dict[str, Any]]:
    got = world.mcp.wait(world.mcp.request("tools/list", {}))
    tools = {t["name"]: t["inputSchema"] for t in got["result"]["tools"]}
    assert {"claim_next", "heartbeat", "commit", "fail", "ask_human", "report"} <= set(tools)
    return tools


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_calls_on_every_tool_and_argument_are_each_answered(world: World, seed: int) -> None:
    rng = random.Random(seed)
    schemas = tool_schemas(world)
    cases = 0
    for tool, schema in sorted(schemas.items()):
        props: dict[str, Any] = schema.get("properties") or {}
        required: list[str] = list(schema.get("required") or [])
        base = {name: REQUIRED.get(tool, {}).get(name, "x") for name in required}
        # missing, wrong shapes of the arguments themselves, an argument nobody knows
        for arguments in ({}, None, [], "x", 7, {"no_such_argument": 1}, {**base, "no_such_argument": "\x1b"}):
            check(world, tool, arguments)
            cases += 1
        for name, prop in sorted(props.items()):
            for value in values_for(rng, prop):
                check(world, tool, {**base, name: value})
                cases += 1
            for text in deep_values(rng):
                before = world.fingerprint()
                rid = world.mcp.fresh_id()
                world.mcp.send_bytes(call_line(rid, tool, json.dumps({**base, name: "__D__"}).replace('"__D__"', text)))
                got = world.mcp.wait(rid)
                result = got["result"] if "result" in got else {"error": got["error"]}
                if result.get("isError") or "error" in result:
                    assert_one_clear_line(refusal_text(result))
                    assert world.fingerprint() == before
                else:
                    world.keep_claimed(json.loads(result["content"][0]["text"]))
                cases += 1
    assert cases > 300, cases
    print(f"{cases} calls")
    assert world.mcp.ok("heartbeat", action="still here")["status"] == "ok"


# ---------------------------------------------------------------------- the wire itself
def wire_cases(rng: random.Random, rid: int) -> list[tuple[bytes, Any]]:
    """(line, the id its answer carries): None for an answer with id null."""
    hb = '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"heartbeat","arguments":{"observation":"%s"}}}'
    junk = bytes(rng.randrange(0, 256) for _ in range(200)).replace(b"\n", b" ")
    huge_string_id = "i" * 100_000
    cases: list[tuple[bytes, Any]] = [
        ((hb % (rid, "a")).encode().replace(b'"a"', b'"a\xff\xfeb"'), rid),  # invalid UTF-8 inside a string
        ((hb % (rid + 1, "a")).encode().replace(b'"a"', b'"\xc0\xaf"'), rid + 1),  # an overlong encoding
        ((hb % (rid + 2, "a")).encode().replace(b'"a"', b'"\xe2\x82"'), rid + 2),  # a cut multi-byte character
        ((hb % (rid + 3, "a"))[:-7].encode(), rid + 3),  # cut short
        (b"hello", None), (b"{", None), (b"}", None), (b"nul\x00here", None), (junk, None), (b"\xef\xbb\xbf{}", None),
        (b"[]", None), (b"[1, 2]", None), (b"42", None), (b'"text"', None), (b"null", None),
        (json.dumps([{"jsonrpc": "2.0", "id": rid + 4, "method": "ping"},
                     {"jsonrpc": "2.0", "id": rid + 5, "method": "tools/call", "params": {"name": "report"}}]).encode(),
         rid + 4),
        (json.dumps({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}).encode(), None),
        (json.dumps({"jsonrpc": "2.0", "id": None, "method": "ping"}).encode(), None),
        (json.dumps({"jsonrpc": "2.0", "id": True, "method": "ping"}).encode(), None),
        (json.dumps({"jsonrpc": "2.0", "id": [1], "method": "ping"}).encode(), None),
        (json.dumps({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}).encode(), None),
        (json.dumps({"jsonrpc": "2.0", "id": 10**60, "method": "ping"}).encode(), 10**60),
        (json.dumps({"jsonrpc": "2.0", "id": -(10**60), "method": "ping"}).encode(), -(10**60)),
        (json.dumps({"jsonrpc": "2.0", "id": huge_string_id, "method": "ping"}).encode(), huge_string_id),
        (json.dumps({"jsonrpc": "2.0", "id": "\x1b]0;x\x07\u202e", "method": "ping"}).encode(), "\x1b]0;x\x07\u202e"),
        (json.dumps({"jsonrpc": "1.0", "id": rid + 6, "method": "ping"}).encode(), rid + 6),
        (json.dumps({"id": rid + 7, "method": "ping"}).encode(), rid + 7),
        (json.dumps({"jsonrpc": "2.0", "id": rid + 8, "method": 7}).encode(), rid + 8),
        (json.dumps({"jsonrpc": "2.0", "id": rid + 9, "method": "tools/call", "params": "x"}).encode(), rid + 9),
        (json.dumps({"jsonrpc": "2.0", "id": rid + 10, "method": "tools/call", "params": {"name": 7}}).encode(),
         rid + 10),
        (json.dumps({"jsonrpc": "2.0", "id": rid + 11, "method": "tools/call", "params": {}}).encode(), rid + 11),
        (json.dumps({"jsonrpc": "2.0", "id": rid + 12, "method": "no/such"}).encode(), rid + 12),
        (json.dumps({"jsonrpc": "2.0", "id": rid + 13, "method": "resources/read",
                     "params": {"uri": "warden://nope/\x1b"}}).encode(), rid + 13),
        (('{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"heartbeat","arguments":'
          '{"progress":NaN,"tokens":Infinity}}}' % (rid + 14)).encode(), rid + 14),
        (('{"jsonrpc":"2.0","id":%d,"id":%d,"method":"ping"}' % (rid + 15, rid + 16)).encode(), rid + 16),
        (('{"jsonrpc":"2.0","id":%d,"method":"ping"}\r' % (rid + 17)).encode(), rid + 17),
        (('{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"heartbeat","arguments":{"observation":"'
          % (rid + 18)).encode() + b"x" * (MESSAGE_MAX + 1000) + b'"}}}', rid + 18),
        (b'{"jsonrpc":"2.0","method":"tools/call","params":{"name":"heartbeat","arguments":{"observation":"'
         + b"y" * (MESSAGE_MAX + 10) + b'"}},"id":' + str(rid + 19).encode() + b"}", None),
        (('{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"a\\ud800","arguments":{}}}'
          % (rid + 20)).encode(), rid + 20),
        (('{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}').encode(), None),
    ]
    return cases


@pytest.mark.parametrize("seed", SEEDS)
def test_every_line_on_the_wire_gets_its_answer(world: World, seed: int) -> None:
    rng = random.Random(seed)
    cases = wire_cases(rng, 50_000 + 1000 * seed)
    rng.shuffle(cases)
    for line, rid in cases:
        before = world.fingerprint()
        world.mcp.send_bytes(line)
        try:
            got = world.mcp.wait(rid) if rid is not None else world.mcp.wait_unaddressed(1)[0]
        except AssertionError as e:
            raise AssertionError(f"{e}: {line[:200]!r}") from None
        if "error" in got:
            assert_one_clear_line(str(got["error"]["message"]))
        elif got["result"].get("isError"):
            assert_one_clear_line(refusal_text(got["result"]))
        assert world.fingerprint() == before, line[:200]
    # a batch is answered for each request it held; nothing else is left over
    world.mcp.wait(50_000 + 1000 * seed + 5)
    assert world.mcp.ok("heartbeat", result="the wire held")["status"] == "ok"
    with world.mcp.cond:
        assert world.mcp.unaddressed == [] and world.mcp.answers == {}


def test_a_request_nested_beyond_any_reader_and_a_flood_of_junk_keep_the_server_answering(world: World) -> None:
    """A 100,000-deep line, then 2,000 junk lines in one write: each junk line is answered (id
    null) and a ping after them all is answered in turn."""
    world.mcp.send_bytes(b"[" * 100_000)
    world.mcp.send_bytes(b"\n".join(b"junk %d \x1b[2J" % i for i in range(2000)))
    world.mcp.wait_unaddressed(2001)
    assert world.mcp.wait(world.mcp.request("ping")) ["result"] == {}
