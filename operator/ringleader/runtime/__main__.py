"""`python -m ringleader.runtime`: run this rank (see main.py)."""

import sys

from ringleader.runtime import main

sys.exit(main.main())
