"""The real Claude Code and Codex CLIs against the scripted model (tests/support/model_server.py,
tests/support/clients.py): the harness every end-to-end test of the integrations stands on.

What is checked here is the harness and the clients' own behaviour that Warden relies on: each
tool call of the script runs and its result goes back to the model; a large output, a failing
command and the final answer with its usage come through; nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import json

from tests.support.clients import (CLAUDE_VERSION, CODEX_VERSION, ClaudeSetup, CodexSetup, run_claude_p,
                                   run_codex_exec, stream_events)
from tests.support.model_server import ModelServer, Reply, Usage, bash, edit, read, shell, write


def test_claude_code_runs_the_script_against_the_local_model(tmp_path):
    script = [Reply(calls=(write("notes.txt", "alpha\nbeta\n"),)), Reply(calls=(edit("notes.txt", "beta", "gamma"),)),
              Reply(calls=(read("notes.txt"),)), Reply(calls=(bash("seq 1 400"),)),
              Reply(calls=(bash("echo broken >&2; exit 3"),)),
              Reply(text="Finished: notes.txt says alpha and gamma.", usage=Usage(1200, 80, cache_read=300))]
    with ModelServer(script) as model:
        setup = ClaudeSetup(tmp_path / "home", tmp_path / "proj", model.url).write()
        done = run_claude_p(setup, "edit the notes", "--allowedTools", "Bash", "Read", "Write", "Edit")
        assert done.returncode == 0, done.stderr
        events = stream_events(done.stdout)
        init = next(e for e in events if e.get("type") == "system" and e.get("subtype") == "init")
        assert init["claude_code_version"] == CLAUDE_VERSION
        result = events[-1]
        assert result["type"] == "result" and result["result"] == "Finished: notes.txt says alpha and gamma."
        assert result["usage"]["input_tokens"] >= 1200 and result["usage"]["cache_read_input_tokens"] >= 300
        assert (setup.project / "notes.txt").read_text() == "alpha\ngamma\n"
        results = model.scripted()[-1].tool_results()
        assert "400" in results[3] and "1\n2\n3" in results[3]  # the large output went back whole
        assert "Exit code 3" in results[4] and "broken" in results[4]
        assert len(model.scripted()) == len(script)
        # nothing but the scripted model was asked: every request came here
        assert all(r.api == "anthropic" for r in model.requests)


def test_codex_runs_the_script_against_the_local_model(tmp_path):
    script = [Reply(calls=(shell("seq 1 300 > big.txt && wc -l big.txt"),)),
              Reply(calls=(shell("echo oops >&2; exit 4"),)),
              Reply(text="Codex finished.", usage=Usage(900, 60, cache_read=100))]
    with ModelServer(script) as model:
        setup = CodexSetup(tmp_path / "home", tmp_path / "proj", model.url).write()
        version = __import__("subprocess").run(setup.argv("--version"), capture_output=True, text=True,
                                                env=setup.env())
        assert CODEX_VERSION in version.stdout
        done = run_codex_exec(setup, "count lines", "-s", "workspace-write")
        assert done.returncode == 0, done.stderr
        events = stream_events(done.stdout)
        commands = [e["item"] for e in events if e.get("type") == "item.completed"
                    and e["item"].get("type") == "command_execution"]
        assert [c["exit_code"] for c in commands] == [0, 4]
        assert "300 big.txt" in commands[0]["aggregated_output"]
        assert any(e.get("type") == "item.completed" and e["item"].get("text") == "Codex finished." for e in events)
        usage = next(e["usage"] for e in events if e.get("type") == "turn.completed")
        assert usage["output_tokens"] >= 60 and usage["cached_input_tokens"] >= 100
        outputs = model.scripted()[-1].tool_results()
        assert "300 big.txt" in outputs[0] and "exited with code 4" in outputs[1]
        assert all(r.api == "openai" for r in model.requests)
        assert json.loads(json.dumps(model.scripted()[0].body))["stream"] is True
