"""A progress line for commands that take a while (`evaluate`, `collect`)."""

from __future__ import annotations

import sys
import threading
import time

#: Seconds of work before the line shows: soon on a terminal, where a person waits; much later in a
#: log or a pipe, where a few seconds of silence say nothing and a line would only be noise.
TERMINAL_DELAY, LOG_DELAY = 3.0, 30.0


class Progress:
    """What a command is doing, on stderr, once it has taken more than `delay` seconds (by
    default `TERMINAL_DELAY` on a terminal, `LOG_DELAY` elsewhere): a count of done out of
    `total` when there is one, and the time so far. On a terminal the line is redrawn in place;
    elsewhere (a log file) a line every `every` seconds."""

    def __init__(
        self,
        what: str,
        total: int | None = None,
        delay: float | None = None,
        every: float = 10.0,
        stream=None,
        command: str = "evaluate",
    ):
        self.what, self.total, self.delay, self.every, self.command = what, total, delay, every, command
        self.stream = stream or sys.stderr
        if delay is None:
            delay = TERMINAL_DELAY if getattr(self.stream, "isatty", lambda: False)() else LOG_DELAY
        self.delay = delay
        self.done, self.shown = 0, False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Progress:
        self.start = time.monotonic()
        self._thread.start()
        return self

    def update(self, done: int) -> None:
        self.done = done

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        if self.shown:
            self._show(final=True)

    def line(self) -> str:
        count = f" {self.done}/{self.total}" if self.total else ""
        return f"ajax-tune {self.command}: {self.what}{count} ({time.monotonic() - self.start:.0f} s)"

    def _run(self) -> None:
        tty = getattr(self.stream, "isatty", lambda: False)()
        if self._stop.wait(self.delay):
            return
        while True:
            self._show(final=False, tty=tty)
            if self._stop.wait(1.0 if tty else self.every):
                return

    def _show(self, final: bool, tty: bool | None = None) -> None:
        tty = getattr(self.stream, "isatty", lambda: False)() if tty is None else tty
        text = self.line() + (", done" if final else "")
        self.stream.write(f"\r{text}\x1b[K" + ("\n" if final else "") if tty else text + "\n")
        self.stream.flush()
        self.shown = True
