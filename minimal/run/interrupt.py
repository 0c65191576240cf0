"""Interruption of a training run: SIGTERM made a ``KeyboardInterrupt`` (``Terminated``), and the interrupt found
behind an error.

SIGTERM is what ``timeout``, a cluster scheduler or a CI cancel send; while ``catch_sigterm``'s handler is
installed it raises ``Terminated`` (a KeyboardInterrupt), so ``minimal.run.train`` saves a checkpoint and stops as
on Ctrl-C. The handler is installed only in the main thread, and ``restore_sigterm`` puts the previous one back.
An interrupt that lands while a compiled (Numba) function returns reaches Python as a SystemError caused by it:
``interrupt_behind`` finds it in the error's chain.
"""
from __future__ import annotations

import signal
import threading

__all__ = ["Terminated"]


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived during ``train``: a checkpoint was saved (as on Ctrl-C) and the run stopped."""


def interrupt_behind(error):
    """The KeyboardInterrupt (Ctrl-C, or ``Terminated``) in ``error``'s chain of causes and contexts, or None."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def _raise_terminated(signum, frame):
    raise Terminated(f"SIGTERM (signal {signum}) during train")


NOT_INSTALLED = object()


def catch_sigterm():
    """Make SIGTERM raise ``Terminated`` (so the run saves and stops as on Ctrl-C); return the old handler.

    Only the main thread may set handlers (a sweep's worker threads run train too); a SIGTERM that is ignored
    (SIG_IGN, e.g. under nohup-like launchers) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        return NOT_INSTALLED
    old = signal.getsignal(signal.SIGTERM)
    if old is signal.SIG_IGN or old is None:  # None: set from C, not ours to replace
        return NOT_INSTALLED
    signal.signal(signal.SIGTERM, _raise_terminated)
    return old


def restore_sigterm(old):
    """Put back the SIGTERM handler that ``catch_sigterm`` replaced (nothing if it installed none)."""
    if old is not NOT_INSTALLED:
        signal.signal(signal.SIGTERM, old)
