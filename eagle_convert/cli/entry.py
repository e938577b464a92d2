"""The `eagle-convert` console script: a Ctrl-C during start-up ends quietly, never in a traceback.

Importing click, rich and the command modules takes tens of milliseconds, during which Python's own
SIGINT handler would raise `KeyboardInterrupt` out of an import and print a traceback. So this
module (standard library only) installs a handler first that prints the one interrupt line and
exits 130 (SIGINT), 143 (SIGTERM) or 129 (SIGHUP); while a command runs, `cli.interrupt` replaces it
with handlers that raise, so the command's cleanup runs (`cli.app._Group.invoke`).
"""

from __future__ import annotations

# `_signal` is the C module under `signal`: imported and installed in microseconds. `signal` itself
# pulls in enum and functools (~15 ms on a loaded machine), and a Ctrl-C inside that import ended in
# a traceback, or, landing in a finalizer, in "Exception ignored" and a command that went on.
import _signal
import gc
import os
import sys

_NAMES = {_signal.SIGINT: "SIGINT", _signal.SIGTERM: "SIGTERM", _signal.SIGHUP: "SIGHUP"}
# A command keeps a record per tensor alive until it ends (200,000 on a crafted header, 3 passes of
# them in `upgrade`); at the default 700 allocations a young-generation collection, and the older
# generations as they fill, re-scanned them: 30% of such an upgrade's time (12.7 s, 9.4 s at 20,000).
# The older generations keep their default ratios (10, 10), so cycles are still collected.
GC_YOUNG_THRESHOLD = 20_000


def _quit(signum: int, frame: object) -> None:
    """Nothing of ours to unwind (start-up, or a finished command): say so and exit at once."""
    interrupt = sys.modules.get("eagle_convert.cli.interrupt")  # no import from a signal handler
    detail = getattr(interrupt, "current_detail", lambda: "; nothing was written")()
    try:
        sys.stdout.flush()
    except Exception:  # a closed or broken stdout must not stop the exit
        pass
    name = _NAMES.get(signum, f"signal {signum}")
    os.write(2, f"Error: interrupted ({name}){detail}\n".encode(errors="replace"))
    os._exit(128 + signum)


def install_quiet_exit() -> None:
    """Make SIGINT, SIGTERM and SIGHUP end the process through `_quit` (ignored ones stay ignored)."""
    for s in _NAMES:
        if _signal.getsignal(s) != _signal.SIG_IGN:
            try:
                _signal.signal(s, _quit)
            except ValueError:  # not the main thread (an embedding program): leave its handlers
                return


def main() -> None:
    """Install the quiet exit, then load and run the command line."""
    install_quiet_exit()
    gc.set_threshold(GC_YOUNG_THRESHOLD, 10, 10)
    from eagle_convert.cli.app import main as app

    app()


if __name__ == "__main__":
    main()
