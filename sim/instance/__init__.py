"""One serving instance: `instance.py` (the SimPy process), `batching/` (policies over waiting/running),
`kv_cache.py` (paged block accounting)."""
