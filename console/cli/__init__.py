"""The ``warden`` command line (``warden = "console.cli:main"``); see ``console.cli.entry``."""

from .entry import build_parser, main

__all__ = ["build_parser", "main"]
