"""The real Claude Code and Codex CLIs for end-to-end tests, pointed at the scripted model
(tests/support/model_server.py).

The binaries come from npm at pinned versions (:data:`CLAUDE_VERSION`, :data:`CODEX_VERSION`):
``.ci/run`` installs them into ``$WARDEN_CLIENTS_DIR`` (default :data:`DEFAULT_DIR`), and so may a
developer (``npm install --prefix DIR @anthropic-ai/claude-code@V @openai/codex@V``). Each
package's native binary comes as an optional dependency; the tests run that binary directly (the
same one the ``claude`` / ``codex`` launchers start). Absent: a test skips on a developer's
machine and fails under ``CI=1``, as the browser tests do without Chromium.

Every run gets a throw-away ``HOME``, a dummy key, ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``
and a proxy on a dead loopback port for everything but 127.0.0.1 (``NO_PROXY``): the clients
reach the scripted model and nothing else.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLAUDE_VERSION = "2.1.197"
CODEX_VERSION = "0.171.0"
DEFAULT_DIR = "/opt/warden-clients"
DUMMY_KEY = "sk-ant-scripted-0000000000000000000000000000"
DEAD_PROXY = "http://127.0.0.1:9"  # the discard port: nothing listens, so no request leaves the machine


def clients_dir() -> Path:
    return Path(os.environ.get("WARDEN_CLIENTS_DIR") or DEFAULT_DIR)


def _arch() -> str:
    m = platform.machine().lower()
    return "arm64" if m in ("aarch64", "arm64") else "x64"


def _version(package_json: Path) -> str | None:
    try:
        return str(json.loads(package_json.read_text()).get("version"))
    except (OSError, ValueError):
        return None


def claude_path() -> Path | None:
    """Claude Code's native binary at the pinned version, or None."""
    mods = clients_dir() / "node_modules" / "@anthropic-ai"
    if _version(mods / "claude-code" / "package.json") != CLAUDE_VERSION:
        return None
    exe = mods / f"claude-code-linux-{_arch()}" / "claude"
    return exe if os.access(exe, os.X_OK) else None


def codex_path() -> Path | None:
    """Codex's native binary at the pinned version, or None."""
    mods = clients_dir() / "node_modules" / "@openai"
    if _version(mods / "codex" / "package.json") != CODEX_VERSION:
        return None
    triple = "aarch64-unknown-linux-musl" if _arch() == "arm64" else "x86_64-unknown-linux-musl"
    exe = mods / f"codex-linux-{_arch()}" / "vendor" / triple / "bin" / "codex"
    return exe if os.access(exe, os.X_OK) else None


def need(which: str) -> Path:
    """The binary, or skip (a developer's machine) / fail (``CI=1``) saying how to install it."""
    path = claude_path() if which == "claude" else codex_path()
    if path is not None:
        return path
    package, version = (("@anthropic-ai/claude-code", CLAUDE_VERSION) if which == "claude"
                        else ("@openai/codex", CODEX_VERSION))
    why = (f"{which} {version} is not installed in {clients_dir()} (npm install --prefix {clients_dir()} "
           f"{package}@{version}; .ci/run does it)")
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)


def warden_command(*args: str) -> str:
    """``warden ARGS`` from this tree, as a shell command line for a client's config."""
    return shlex.join([sys.executable, "-m", "console", *args])


def base_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A clean environment: no key, proxy or config of the machine's leaks in."""
    path = os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"])
    env = {"PATH": path, "HOME": str(home), "TERM": "xterm-256color", "LANG": "C.UTF-8", "USER": "tester",
           "PYTHONPATH": str(ROOT), "HTTPS_PROXY": DEAD_PROXY, "HTTP_PROXY": DEAD_PROXY, "https_proxy": DEAD_PROXY,
           "http_proxy": DEAD_PROXY, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
           "XDG_CONFIG_HOME": str(home / ".config"), "XDG_STATE_HOME": str(home / ".local" / "state"),
           "XDG_CACHE_HOME": str(home / ".cache")}
    for name in ("WARDEN_STRICT_READS",):
        if name in os.environ:
            env[name] = os.environ[name]
    env.update(extra or {})
    return env


# ---------------------------------------------------------------------- Claude Code
@dataclass
class ClaudeSetup:
    """A throw-away home and project for Claude Code."""

    home: Path
    project: Path
    model_url: str
    settings: dict[str, Any] = field(default_factory=dict)
    mcp: dict[str, Any] | None = None

    def write(self) -> "ClaudeSetup":
        (self.home / ".claude").mkdir(parents=True, exist_ok=True)
        self.project.mkdir(parents=True, exist_ok=True)
        (self.home / ".claude" / "settings.json").write_text(json.dumps(self.settings, indent=1))
        # what a person's first run would have settled: onboarding done, this key approved, the
        # project trusted (else the interactive client asks before anything else)
        state = {"hasCompletedOnboarding": True, "theme": "dark", "numStartups": 5,
                 "customApiKeyResponses": {"approved": [DUMMY_KEY[-20:]], "rejected": []},
                 "projects": {str(self.project): {"hasTrustDialogAccepted": True, "allowedTools": [],
                                                  "hasCompletedProjectOnboarding": True}}}
        (self.home / ".claude.json").write_text(json.dumps(state))
        if self.mcp is not None:
            (self.home / "mcp.json").write_text(json.dumps({"mcpServers": self.mcp}))
        return self

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return base_env(self.home, {"ANTHROPIC_BASE_URL": self.model_url, "ANTHROPIC_API_KEY": DUMMY_KEY,
                                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
                                    "DISABLE_ERROR_REPORTING": "1", "DISABLE_TELEMETRY": "1",
                                    "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1", **(extra or {})})

    def argv(self, *args: str) -> list[str]:
        out = [str(need("claude"))]
        if self.mcp is not None:
            out += ["--mcp-config", str(self.home / "mcp.json")]
        return out + list(args)


def claude_hooks(ledger: str, sessions: str, *extra: str, events: tuple[str, ...] | None = None,
                 timeout: int = 600) -> dict[str, Any]:
    """The ``hooks`` of settings.json as docs/agents.md gives them, for this tree's warden."""
    cmd = warden_command("hook", "claude", "--ledger", ledger, "--sessions", sessions, *extra)
    tool_events = ("PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure", "PermissionDenied")
    names = events or ("SessionStart", "UserPromptSubmit", *tool_events, "Notification", "Stop", "SessionEnd")
    hooks: dict[str, Any] = {}
    for name in names:
        entry: dict[str, Any] = {"hooks": [{"type": "command", "command": cmd, "timeout": timeout}]}
        if name in tool_events:
            entry["matcher"] = "*"
        if name == "Notification":
            entry["matcher"] = "permission_prompt|idle_prompt"
        hooks[name] = [entry]
    return hooks


def run_claude_p(setup: ClaudeSetup, prompt: str, *args: str, timeout: float = 120,
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``claude -p PROMPT --output-format stream-json --verbose`` in the project, to its end."""
    return subprocess.run(setup.argv("-p", prompt, "--output-format", "stream-json", "--verbose", *args),
                          cwd=setup.project, env=setup.env(env), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def stream_events(out: str) -> list[dict[str, Any]]:
    events = []
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except ValueError:
                pass
    return events


# ---------------------------------------------------------------------- Codex
@dataclass
class CodexSetup:
    """A throw-away ``CODEX_HOME`` whose model provider is the scripted model."""

    home: Path
    project: Path
    model_url: str
    hooks: dict[str, Any] | None = None
    config: str = ""

    @property
    def codex_home(self) -> Path:
        return self.home / ".codex"

    def write(self) -> "CodexSetup":
        self.codex_home.mkdir(parents=True, exist_ok=True)
        self.project.mkdir(parents=True, exist_ok=True)
        toml = (f'model = "gpt-scripted"\nmodel_provider = "scripted"\n'
                f'[model_providers.scripted]\nname = "scripted"\nbase_url = "{self.model_url}/v1"\n'
                f'wire_api = "responses"\nenv_key = "SCRIPTED_API_KEY"\nrequest_max_retries = 0\n'
                f'stream_max_retries = 0\n{self.config}\n')
        (self.codex_home / "config.toml").write_text(toml)
        if self.hooks is not None:
            (self.codex_home / "hooks.json").write_text(json.dumps({"hooks": self.hooks}, indent=1))
        return self

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        exe = need("codex")
        tools = exe.parent.parent / "codex-path"  # the launcher puts its bundled rg on PATH
        env = base_env(self.home, {"CODEX_HOME": str(self.codex_home), "SCRIPTED_API_KEY": "dummy",
                                   **(extra or {})})
        env["PATH"] = f"{tools}{os.pathsep}{env['PATH']}"
        return env

    def argv(self, *args: str) -> list[str]:
        return [str(need("codex")), *args]


def codex_hooks(ledger: str, sessions: str, *extra: str, events: tuple[str, ...] | None = None,
                timeout: int = 600) -> dict[str, Any]:
    cmd = warden_command("hook", "codex", "--ledger", ledger, "--sessions", sessions, *extra)
    tool_events = ("PreToolUse", "PermissionRequest", "PostToolUse")
    names = events or ("SessionStart", "UserPromptSubmit", *tool_events, "Stop")
    hooks: dict[str, Any] = {}
    for name in names:
        entry: dict[str, Any] = {"hooks": [{"type": "command", "command": cmd, "timeout": timeout}]}
        if name in tool_events:
            entry["matcher"] = "*"
        hooks[name] = [entry]
    return hooks


def run_codex_exec(setup: CodexSetup, prompt: str, *args: str, timeout: float = 120,
                   env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``codex exec --json PROMPT`` in the project (git-initialised: Codex wants a repository)."""
    if not (setup.project / ".git").exists():
        subprocess.run(["git", "init", "-q", str(setup.project)], check=True)
    return subprocess.run(setup.argv("exec", "--json", "--skip-git-repo-check", *args, prompt), cwd=setup.project,
                          env=setup.env(env), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


__all__ = ["CLAUDE_VERSION", "CODEX_VERSION", "ClaudeSetup", "CodexSetup", "DUMMY_KEY", "base_env",
           "claude_hooks", "claude_path", "clients_dir", "codex_hooks", "codex_path", "need", "run_claude_p",
           "run_codex_exec", "stream_events", "warden_command"]
