"""`python -m ingest_adilet`: see ingest_adilet.cli."""

import sys

from ingest_adilet.cli import main

sys.exit(main())
