"""A fake Claude Code: plays one session's hook events against ``warden hook claude``, as Claude
Code runs its command hooks — a new process per event, the event's JSON on stdin, the answer read
from stdout and the exit status — and writes each answer as one JSON line, as soon as it has it,
to the ``--out`` file (tests wait on that file).

    python tests/support/fake_claude.py --ledger L --sessions DIR --out answers.jsonl \
        --session s-123 SessionStart UserPromptSubmit PreToolUse PermissionRequest PostToolUse Stop

The events' payloads are the recorded ones in tests/fixtures/agents/claude_hooks/ (made from the
published hooks reference), with the session id replaced.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "agents" / "claude_hooks"
FILES = {"SessionStart": "session_start", "UserPromptSubmit": "user_prompt_submit", "PreToolUse": "pre_tool_use",
         "PermissionRequest": "permission_request", "PostToolUse": "post_tool_use", "Stop": "stop",
         "SessionEnd": "session_end", "IdleNotification": "notification_idle_prompt",
         "PermissionNotification": "notification_permission_prompt"}


def payload(event: str, session: str) -> bytes:
    data = json.loads((FIXTURES / f"{FILES[event]}.json").read_text())
    data["session_id"] = session
    return json.dumps(data).encode()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ledger", required=True)
    ap.add_argument("--sessions", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--session", default="fake-session-0001")
    ap.add_argument("--hook-arg", action="append", default=[], help="extra argument for warden hook claude")
    ap.add_argument("events", nargs="+", choices=sorted(FILES))
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "console", "hook", "claude", "--ledger", args.ledger, "--sessions", args.sessions,
           *args.hook_arg]
    with open(args.out, "a", encoding="utf-8") as out:
        for event in args.events:
            done = subprocess.run(cmd, input=payload(event, args.session), capture_output=True, env=env, timeout=900)
            text = done.stdout.decode("utf-8", "replace").strip()
            out.write(json.dumps({"event": event, "exit": done.returncode,
                                  "answer": json.loads(text) if text.startswith("{") else text,
                                  "stderr": done.stderr.decode("utf-8", "replace").strip()}) + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
