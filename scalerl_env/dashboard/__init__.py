"""The read-only dashboard: typed JSON routes over one run folder (or a server's ledger) and static pages.

Guaranteed: every route only reads (the ledger is opened read-only, or the server's own ledger is queried
through its read-only `query`); every list a route returns is bounded (`LIMIT`), so a long run's pages stay
fast. Not guaranteed: a consistent view across files of a run that is still training (each file is read
as it is at that moment).
"""
