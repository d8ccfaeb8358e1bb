"""Imported once by the fork server of `lint --sweep`'s workers (tilescope.sweep.worker_pool): TileLang
and the capture code, so that each forked worker starts with them loaded. Without TileLang the
server starts all the same (it would die on any error but ImportError): each worker's own
import_tilelang then says what is missing, as before."""

import contextlib

from tilescope.errors import MissingComponentError
from tilescope.ir.capture import import_tilelang

with contextlib.suppress(MissingComponentError):
    import_tilelang()
