"""The pass-rate ledger store: DuckDB schema, the owner's index, ingest, snapshots and retirement."""
