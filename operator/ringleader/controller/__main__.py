"""`python -m ringleader.controller [flags]`: the operator without the rest of the CLI (tests, debugging)."""

import sys

from ringleader.controller import cli

sys.exit(cli.main())
