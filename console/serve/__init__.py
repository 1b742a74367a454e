"""`warden serve`: the console in a browser, private by default (needs the ``serve`` extra).

``auth`` (tokens, cookie, origin), ``session`` (one console process per browser session),
``server`` (the routes, the page, running), ``static/`` (the page, its script, the fonts).
The ``warden serve`` subcommand itself (flags, checks) lives with the rest of the CLI.
"""
