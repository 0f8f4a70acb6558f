"""Progress of a long `dslint check` on a terminal (issue 32 part 5): after about a second, one line on stderr
with the phase and the files done (rich), erased when the run ends.

Shown only where a person watches: stderr is a terminal, the format is `text` (JSON, SARIF and GitHub output are
read by programs: never any progress with them), `TERM` is not `dumb` and `DSLINT_NO_PROGRESS` is unset.
`DSLINT_PROGRESS_AFTER` (seconds) moves the one-second threshold (the tests set 0).

No thread: a refresh thread alive while the engine forks its workers could hold a lock (the console's, the
stream's) that a child then waits on forever. The display is refreshed by the run itself -- at each phase,
each file done, and each `dslint.timeline.span` (every parse, every file of a serial analysis, every step of
the main process while it waits for its workers) -- at most every `REFRESH_EVERY` seconds, and only in the
process that created it (forked workers inherit the object and never draw). rich is imported only when the
display starts, so a run under a second never pays for it."""

from __future__ import annotations

import os
import sys
import time
from typing import Optional

START_AFTER = 1.0          # seconds before anything is shown: a short run prints nothing more
REFRESH_EVERY = 0.1


class Progress:
    """Phase and files done; a no-op until `START_AFTER` seconds have passed, and outside its own process."""

    def __init__(self, stream=None, start_after: float = START_AFTER):
        self._stream = stream if stream is not None else sys.stderr
        self._pid = os.getpid()
        self._t0 = time.monotonic()
        self._start_after = start_after
        self._last = 0.0
        self._bar = None
        self._task = None
        self.phase_name = "reading files"
        self.done = 0
        self.total: Optional[int] = None
        self.shown = False                  # whether the display ever started (tests)

    def phase(self, name: str, total: Optional[int] = None) -> None:
        self.phase_name, self.total, self.done = name, total, 0
        self.tick(force=True)

    def advance(self, n: int = 1) -> None:
        self.done += n
        self.tick()

    def tick(self, force: bool = False) -> None:
        if os.getpid() != self._pid:
            return
        now = time.monotonic()
        if now - self._t0 < self._start_after or not force and now - self._last < REFRESH_EVERY:
            return
        self._last = now
        try:
            if self._bar is None:
                self._start()
            files = f"{self.done}/{self.total} files" if self.total is not None else ""
            self._bar.update(self._task, description=self.phase_name, completed=self.done, total=self.total,
                             files=files)
            self._bar.refresh()
        except Exception:           # a display problem never fails a check
            self._bar = None
            self._start_after = float("inf")

    def _start(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress as Bar, SpinnerColumn, TextColumn, TimeElapsedColumn
        console = Console(file=self._stream, force_terminal=True)
        self._bar = Bar(SpinnerColumn(), TextColumn("dslint: {task.description}"), BarColumn(),
                        TextColumn("{task.fields[files]}"), TimeElapsedColumn(), console=console,
                        transient=True, auto_refresh=False, redirect_stdout=False, redirect_stderr=False)
        self._task = self._bar.add_task(self.phase_name, total=self.total, files="")
        self._bar.start()
        self.shown = True

    def close(self) -> None:
        """Erase the display (it is transient); the report is written after this."""
        if self._bar is not None and os.getpid() == self._pid:
            try:
                self._bar.stop()
            except Exception:
                pass
            self._bar = None


class _Off:
    """What the engine talks to when no progress is shown."""

    def phase(self, name: str, total: Optional[int] = None) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass

    def tick(self, force: bool = False) -> None:
        pass

    def close(self) -> None:
        pass


OFF = _Off()
current = OFF               # the run's display: `begin` sets it, `end` puts OFF back


def wanted(output_format: str, stream=None) -> bool:
    """A person watches: stderr a terminal, the text format, a terminal able to redraw a line."""
    stream = stream if stream is not None else sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        return False
    return tty and output_format == "text" and os.environ.get("TERM") != "dumb" \
        and not os.environ.get("DSLINT_NO_PROGRESS")


def begin(output_format: str) -> None:
    """Start this run's progress (shown after `START_AFTER` seconds) when `wanted`."""
    global current
    from dslint import timeline
    if wanted(output_format):
        try:
            after = float(os.environ.get("DSLINT_PROGRESS_AFTER", START_AFTER))
        except ValueError:
            after = START_AFTER
        current = Progress(start_after=after)
        timeline.TICK = current.tick
    else:
        current = OFF


def end() -> None:
    global current
    from dslint import timeline
    current.close()
    current = OFF
    timeline.TICK = None
