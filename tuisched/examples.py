"""Small python jobs used by the sample configuration."""

from __future__ import annotations

import threading
import time


def sleep_briefly() -> None:
    """A plain callable job: succeeds after a second."""
    time.sleep(1)


class Countdown:
    """A class job: counts down, reports its status, and stops when asked."""

    def __init__(self, seconds: int = 10) -> None:
        self.remaining = seconds
        self._stopped = threading.Event()

    @property
    def status(self) -> str:
        """A short running-status string."""
        return f"{self.remaining}s left"

    @property
    def message_data(self) -> dict[str, object]:
        """Data handed to alert templates."""
        return {"remaining": self.remaining}

    def run(self) -> None:
        """Count down once a second; return early when stopped."""
        while self.remaining > 0 and not self._stopped.wait(1):
            self.remaining -= 1

    def stop(self) -> None:
        """Make `run` return within a moment."""
        self._stopped.set()
