"""One serving instance: `instance.py` (its event-driven loop on SimPy), `batching/` (policies over waiting/running),
`kv_cache.py` (paged block accounting)."""
