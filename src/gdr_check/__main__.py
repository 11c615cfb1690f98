"""`python -m gdr_check`."""

import os
import sys

try:  # Ctrl-C while the CLI is still being imported: the one line `entry.run` gives later
    from .cli.entry import run
except KeyboardInterrupt:
    os.write(2, b"error: interrupted\n")
    sys.exit(130)

run()
