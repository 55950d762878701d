"""The persisted data model: records, tables, migrations and search. Imports nothing of the project."""

from store.db import Store, StoreError

__all__ = ["Store", "StoreError"]
