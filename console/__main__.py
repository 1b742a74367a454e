"""`python -m console` is `warden`."""

import sys

from .cli import main

sys.exit(main())
