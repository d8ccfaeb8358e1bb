"""Imported once by the local worker pool's fork server (`tilescope.rankwork._process_pool`): what
every per-rank worker needs, so that each forked worker starts with it loaded instead of importing
pandas, pyarrow, DuckDB and the rules itself (~1 s per worker on this project's 2-core machine).
It does not import tilescope.rankwork, which imports it (a worker gets that module with its job)."""

from tilescope.analysis import kernel_columns_read
from tilescope.cluster import rank_tables  # noqa: F401
from tilescope.io import load  # noqa: F401
from tilescope.io.prefetch import import_readers
from tilescope.report.data import profile_part  # noqa: F401

import_readers()
kernel_columns_read()  # discovers and imports every rule module
