"""``python -m refimpl`` runs the command line."""

import sys

from refimpl.cli import main

sys.exit(main())
