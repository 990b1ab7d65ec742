"""A proxy statement as Spark SQL without any datamap: `translate_only` writes the
proxy's timeseries() in Spark SQL. The DDL and SELECT handlers (proxy/datamaps/handler.py)
forward with it, and the answer audit (proxy/datamaps/verify/auditor.py) runs the base query
with it."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rewriter import translate_timeseries

if TYPE_CHECKING:
    from proxy.datamaps.service import DatamapService

log = logging.getLogger("proxy.datamaps")     # the handler's logger name: log filters use it


def translate_only(service: DatamapService, statement: str, current_db: str) -> str:
    """timeseries() -> Spark SQL, no datamaps; the original on any failure (logged)."""
    schemas = service.known_schemas()   # only what is known: no Spark call
    try:
        return translate_timeseries(statement, schemas, current_db)
    except RecursionError:
        log.warning("statement of %d characters is nested too deeply to translate "
                    "timeseries(); forwarding the original", len(statement))
        return statement
    except Exception:  # noqa: BLE001 - forward the original; Spark reports the function
        log.warning("timeseries translation failed; forwarding the original", exc_info=True)
        return statement
