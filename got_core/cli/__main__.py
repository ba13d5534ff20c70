"""``python -m got_core.cli``: the ``got`` command without the console script on PATH."""

import sys

from got_core.cli import main

sys.exit(main())
