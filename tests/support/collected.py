"""The modules this pytest process had imported when collection finished (tests/conftest.py
records them): tests/test_without_pyspark.py reads them to learn whether collecting the
whole tree imported pyspark, instead of collecting it all a second time."""
from __future__ import annotations

import sys

AFTER_COLLECTION: set[str] = set()


def record() -> None:
    AFTER_COLLECTION.clear()
    AFTER_COLLECTION.update(sys.modules)
