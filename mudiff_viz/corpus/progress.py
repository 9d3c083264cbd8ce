"""A progress bar with an ETA on stderr: tqdm when it is installed, else one plain line per update."""

from __future__ import annotations

import sys
import time


def format_eta(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class ProgressBar:
    """``bar(done, total, message)`` after each finished page; ``close()`` at the end."""

    def __init__(self, stream=None, min_interval_s: float = 1.0):
        self.stream = stream or sys.stderr
        self.min_interval_s = min_interval_s
        self.start = time.monotonic()
        self.last = 0.0
        self._tqdm = None
        try:
            from tqdm import tqdm

            self._tqdm_class = tqdm
        except ImportError:
            self._tqdm_class = None

    def __call__(self, done: int, total: int, message: str = "") -> None:
        if self._tqdm_class is not None:
            if self._tqdm is None:
                self._tqdm = self._tqdm_class(total=total, unit="page", file=self.stream, dynamic_ncols=True)
            self._tqdm.total = total
            self._tqdm.update(done - self._tqdm.n)
            self._tqdm.set_postfix_str(message[:80], refresh=False)
            return
        now = time.monotonic()
        if done < total and now - self.last < self.min_interval_s:
            return
        self.last = now
        elapsed = now - self.start
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = format_eta((total - done) / rate) if rate > 0 else "?"
        width = 30
        filled = int(width * done / total) if total else width
        print(f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} pages, {rate:.2f}/s, ETA {eta} {message}",
              file=self.stream, flush=True)

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.close()
