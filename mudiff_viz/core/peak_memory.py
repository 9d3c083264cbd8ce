"""This process's own peak resident memory.

Linux's ``ru_maxrss`` carries a forking parent's peak into the child, across ``exec`` too, so a
worker started by a 2 GB process reports 2 GB. ``VmHWM`` is the high-water mark of the current
address space only, which is what a benchmark means by "this process's peak".
"""

from __future__ import annotations

import resource


def own_peak_rss_mb() -> float:
    """Peak resident memory of this process's address space, in MB (``ru_maxrss`` off Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
