"""How many requests one run can hold in this machine's memory, so that a request count beyond it is refused
before anything is allocated.

A run keeps a few columns per request: the workload (16 bytes for plain traffic), the recorder's columns (31) and
the summary's transients; `python bench/soak.py --requests 10000000` measured a peak of 884 MB resident for
10 M requests, 88 bytes a request. `PEAK_BYTES_PER_REQUEST` rounds that up, and the limit is the machine's
physical memory divided by it (a 24 GiB machine: about 250 M requests). Generating traffic takes more per request
for a moment (a float64 per request per drawn column), which the rounding covers.
"""
from __future__ import annotations

import os

PEAK_BYTES_PER_REQUEST = 100  # measured 88 (bench/soak.py, 10 M requests, 884 MB peak), rounded up


def physical_memory_bytes() -> int:
    """This machine's physical memory (POSIX); 0 where it cannot be read (no limit is then applied)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return 0


def max_requests() -> int:
    """The most requests one run may hold here (0: unknown, no limit)."""
    return physical_memory_bytes() // PEAK_BYTES_PER_REQUEST


def too_many(count: float) -> str | None:
    """Why `count` requests cannot be held here (None when they can)."""
    limit = max_requests()
    if limit and count > limit:
        gib = count * PEAK_BYTES_PER_REQUEST / 2**30
        return (f"{count:,.0f} requests would need about {gib:,.0f} GiB at {PEAK_BYTES_PER_REQUEST} bytes a request; "
                f"this machine's {physical_memory_bytes() / 2**30:.0f} GiB hold at most {limit:,} requests")
    return None
