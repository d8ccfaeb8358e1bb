"""``python -m generator`` (from sample_traces/) or ``python -m sample_traces.generator`` (repo root)."""

import sys

from .cli import main

sys.exit(main())
