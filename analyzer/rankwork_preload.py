"""Imported once by the local worker pool's fork server (`analyzer.rankwork._process_pool`): what
every per-rank worker needs, so that each forked worker starts with it loaded instead of importing
pandas, pyarrow, DuckDB and the rules itself (~1 s per worker on this project's 2-core machine)."""

from analyzer.analysis import kernel_columns_read
from analyzer.cluster import rank_tables  # noqa: F401
from analyzer.io import load
from analyzer.rankwork import run_unit  # noqa: F401
from analyzer.report.data import profile_part  # noqa: F401

load._import_readers()
kernel_columns_read()  # discovers and imports every rule module
