"""`python -m gdr_check`."""

import sys

from .cli.main import main

sys.exit(main())
