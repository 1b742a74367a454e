"""The ``warden`` command line (``warden = "console.cli:main"``); see ``console.cli.entry``.

``warden hook claude`` takes a lean path (``console.cli.hook``): Claude Code runs it around every
tool call, so it does not build the whole parser nor load the console.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Callable, Sequence

if TYPE_CHECKING:
    from .common import CliParser


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args[:1] == ["hook"]:
            from .hook import fast_main

            done = fast_main(args[1:])
            if done is not None:
                return done
        from .entry import main as full_main
    except KeyboardInterrupt:  # Ctrl-C while the command is still loading: no traceback either
        print("warden: interrupted", file=sys.stderr)
        return 130
    return full_main(args)


def __getattr__(name: str) -> Callable[[], CliParser]:  # ``from console.cli import build_parser`` (tests, completion)
    if name == "build_parser":
        from .entry import build_parser

        return build_parser
    raise AttributeError(name)


__all__ = ["build_parser", "main"]
