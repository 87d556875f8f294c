"""Every line a run writes, in order, for a command that prints a run as it goes.

An event of a run's output (`RunOutputWritten`) carries only the newest lines
of a burst, so that a run printing fast cannot flood the bus; `tuisched run`
and `trigger --wait` print the whole output all the same. The events only
wake the reader here: it reads the run's output file through the seam from
where it stopped, up to what is written, the way `logs -f` follows a run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from tuisched.domain.errors import UnknownRunError
from tuisched.frontends.exits import reader_gone

if TYPE_CHECKING:
    from tuisched.runtime.control import SchedulerControl


class OutputStream:
    """The output of runs, printed to `out` from where each was last read."""

    def __init__(self, control: SchedulerControl, out: TextIO, *, outlive_reader: bool) -> None:
        """`outlive_reader`: when the reader of `out` goes away (`| head`), go on reading
        nothing (a run in this process runs to its end), else raise BrokenPipeError (a
        client following a scheduler's run ends quietly, as `cat` does)."""
        self._control = control
        self._out = out
        self._outlive_reader = outlive_reader
        self._read_to: dict[str, int] = {}
        """Where each run's output was read to (bytes into its file)."""
        self._gone = False

    async def catch_up(self, run_id: str) -> None:
        """Print what the run wrote since the last look (nothing once the reader is gone)."""
        offset = self._read_to.get(run_id, 0)
        while not self._gone:
            try:
                chunk = await self._control.output(run_id, offset=offset)
            except UnknownRunError:  # not in this node's history (yet): nothing to read
                break
            if chunk.source != "file" or chunk.next_offset <= offset:
                break
            self._write(chunk.lines)
            offset = chunk.next_offset
        self._read_to[run_id] = offset

    def _write(self, lines: tuple[str, ...]) -> None:
        try:
            self._out.write("".join(f"{line}\n" for line in lines))
            self._out.flush()
        except BrokenPipeError:  # the reader went away (`| head`)
            self._gone = True
            reader_gone()
            if not self._outlive_reader:
                raise
