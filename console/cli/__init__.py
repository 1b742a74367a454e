"""The ``warden`` command line (``warden = "console.cli:main"``); see ``console.cli.entry``.

``warden hook claude`` takes a lean path (``console.cli.hook``): Claude Code runs it around every
tool call, so it does not build the whole parser nor load the console.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Callable, Sequence

if TYPE_CHECKING:
    from .common import CliParser


# The console draws a screen at most this often (Textual's ``TEXTUAL_FPS``, read when Textual is
# imported: here, before it is, for the commands that draw one). After a frame Textual's update
# timer waits one to two periods before the next, so a change applied just after a frame (a key's,
# the previous write's) waited up to 33 ms at Textual's 60: at 120, up to 17 (docs/console.md "How
# often the screen moves"). An operator's TEXTUAL_FPS wins.
FRAME_RATE = "120"
DRAWING = (["console"], ["demo"])  # the commands that run the console in this process


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in DRAWING:
        os.environ.setdefault("TEXTUAL_FPS", FRAME_RATE)
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
