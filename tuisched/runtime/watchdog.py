"""A watchdog on the event loop: a blocked loop is noticed, counted, and what blocked it named.

The loop beats every INTERVAL seconds (a timer on the loop itself). A thread
watches the beat: when it is late by more than THRESHOLD, the thread samples
the loop thread's stack, so the warning can say which code was running
(`tuisched/runtime/x.py:42 in parse`). One warning per episode, when the loop
beats again, with how long it was blocked; a loop blocked for more than
STILL_BLOCKED seconds is reported at once, in case it never comes back.
Real time (a `SystemClock`, unless one is given), whatever the runtime's
injected clock says: what it measures is how long the loop really stood still.
"""

from __future__ import annotations

import logging
import sys
import threading
import traceback
from dataclasses import dataclass

from tuisched.runtime.clock import Clock, SystemClock, Timer

log = logging.getLogger(__name__)

INTERVAL = 0.1
"""How often the loop beats (seconds)."""
THRESHOLD = 0.25
"""Lag that counts as a blocked loop (seconds)."""
STILL_BLOCKED = 5.0
"""A loop blocked this long is reported before it beats again."""
RECENT = 60.0
"""How long an episode stays in the status (seconds)."""


@dataclass(frozen=True, slots=True)
class LagReport:
    """What the watchdog has seen."""

    episodes: int
    """Times the loop was blocked for longer than THRESHOLD."""
    recent: float
    """How long the loop was blocked in the latest episode, if it ended less than a
    minute ago (seconds; 0 otherwise)."""
    worst: float
    """The longest episode so far (seconds)."""


class LoopWatchdog:
    """Beats on the loop, watches from a thread; `report()` says what it saw."""

    def __init__(self, clock: Clock | None = None) -> None:
        """`clock`: real time by default (a test may drive the beats with a ManualClock)."""
        self._clock: Clock = clock or SystemClock()
        self._monotonic = self._clock.monotonic
        self._beat = self._monotonic()
        self._loop_thread = 0
        self._timer: Timer | None = None
        self._stop = threading.Event()
        self._sample = ""
        """What the loop thread was running when the current episode was noticed."""
        self._told = False
        self._episodes = 0
        self._last = (0.0, 0.0)
        """(lag, when it ended) of the latest episode."""
        self._worst = 0.0

    def start(self) -> None:
        """Start beating on the running loop and watching from a thread."""
        self._loop_thread = threading.get_ident()
        self._beat = self._monotonic()
        self._timer = self._clock.call_later(INTERVAL, self._tick)
        self._stop.clear()
        thread = threading.Thread(target=self._watch, name="tuisched-watchdog", daemon=True)
        thread.start()

    def stop(self) -> None:
        """Stop beating and watching."""
        self._stop.set()
        if self._timer is not None:
            self._timer.cancel()

    def report(self) -> LagReport:
        """The episodes so far."""
        lag, ended = self._last
        recent = lag if ended and self._monotonic() - ended < RECENT else 0.0
        return LagReport(episodes=self._episodes, recent=recent, worst=self._worst)

    def lateness(self) -> float:
        """How late the loop's next beat is now (seconds, 0 while on time or stopped).

        Safe from any thread: what a health check reads while the loop may be blocked.
        """
        if self._stop.is_set() or self._timer is None:
            return 0.0
        return max(self._monotonic() - self._beat - INTERVAL, 0.0)

    def _tick(self) -> None:
        now = self._monotonic()
        lag = now - self._beat - INTERVAL
        if lag > THRESHOLD:
            self._episode_over(lag, now)
        self._beat = now
        self._timer = self._clock.call_later(INTERVAL, self._tick)

    def _episode_over(self, lag: float, now: float) -> None:
        self._episodes += 1
        self._last = (lag, now)
        self._worst = max(self._worst, lag)
        what = self._sample or "(not sampled)"
        log.warning("the event loop was blocked for %.2f s; it was running: %s", lag, what)
        self._sample, self._told = "", False

    def _watch(self) -> None:
        while not self._stop.wait(INTERVAL / 2):
            late = self._monotonic() - self._beat - INTERVAL
            if late > THRESHOLD and not self._sample:
                self._sample = self._loop_stack()
            if late > STILL_BLOCKED and not self._told:
                self._told = True
                log.warning(
                    "the event loop has been blocked for %.1f s and counting; running: %s",
                    late, self._sample,
                )  # fmt: skip

    def _loop_stack(self) -> str:
        """The innermost frames the loop thread is in, newest last, as one line."""
        frame = sys._current_frames().get(self._loop_thread)
        if frame is None:
            return "(unknown)"
        frames = traceback.extract_stack(frame)[-4:]
        return " <- ".join(f"{f.filename}:{f.lineno} in {f.name}" for f in reversed(frames))
