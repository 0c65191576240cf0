"""The dask scheduler a sweep runs on: its address checked, asked whether it answers as a scheduler, connected.

``scheduler=None`` starts a ``distributed.LocalCluster`` (``n_workers`` worker processes with
``threads_per_worker`` threads each), listening on 127.0.0.1 only, its dashboard included;
``scheduler="tcp://host:port"`` connects to a running cluster instead, after asking it dask's handshake within
``connect_timeout`` seconds: an address that does not answer as a scheduler (its dashboard's port, a silent
listener) raises ``SchedulerUnreachable`` naming it instead of waiting forever. ``check_scheduler`` checks an
address's form without connecting (a command line does it before any work). Used by ``minimal.run.sweep``.
"""
from __future__ import annotations

from urllib.parse import urlsplit

from ..validate import InputError

__all__ = ["check_scheduler", "SchedulerUnreachable", "SCHEDULER_PROTOCOLS"]

SCHEDULER_PROTOCOLS = ("tcp", "tls", "ws", "wss", "ucx", "inproc")  # dask's comm protocols


def check_scheduler(scheduler):
    """Return ``scheduler`` if it is None or looks like a dask scheduler address, ``protocol://host:port`` with
    a protocol of ``SCHEDULER_PROTOCOLS`` (``inproc://...`` takes any rest); connects to nothing, so a command
    line can check it before the experiments that come before the first sweep (a bad address otherwise failed
    only there, after ``connect_timeout`` seconds of retries).

    Raises:
        InputError: naming ``scheduler``, the expected form and what is wrong.
    """
    if scheduler is None:
        return None
    why = None
    if not isinstance(scheduler, str):
        why = f"not a string but {type(scheduler).__name__}"
    else:
        protocol, sep, rest = scheduler.partition("://")
        if not sep:
            why = "no protocol:// in front"
        elif protocol not in SCHEDULER_PROTOCOLS:
            why = f"unknown protocol {protocol!r} (dask knows {', '.join(SCHEDULER_PROTOCOLS)})"
        elif protocol == "inproc":
            why = None if rest else "nothing after inproc://"
        else:
            parts = urlsplit(f"{protocol}://{rest}")
            try:
                port = parts.port
            except ValueError:
                port = -1
            if not parts.hostname:
                why = "no host"
            elif port is None or port <= 0:
                why = "no port number (1-65535) after host:"
            elif parts.path or parts.query or parts.fragment:
                why = f"something after the port ({rest.split(':')[-1]!r})"
    if why is not None:
        raise InputError(f"scheduler must be None or an address like 'tcp://host:8786', got {scheduler!r}: {why}")
    return scheduler


class SchedulerUnreachable(InputError):
    """``scheduler`` did not answer as a dask scheduler within the connect timeout (nothing listens there, a
    dashboard's web port, a silent listener, a worker's address); the message names the address."""


_SCHEDULER_HINT = ("a scheduler address is the one `dask scheduler` prints as 'Scheduler at: tcp://HOST:PORT' "
                   "(port 8786 by default; 8787 is its dashboard, a web page)")


def probe_scheduler(scheduler, timeout):
    """Connect to ``scheduler``, do dask's handshake and ask its identity, all within ``timeout`` seconds.

    dask's own ``Client(address, timeout=...)`` bounds only the TCP connect: against a listener that accepts and
    never answers the protocol (a dashboard's HTTP port, a silent socket) it waited for the handshake forever.
    The probe runs on a fresh event loop in a thread of its own, so it works inside Jupyter's running loop too.

    Raises:
        SchedulerUnreachable: naming the address, the timeout, what went wrong and what an address looks like.
    """
    import asyncio
    import concurrent.futures

    from distributed.comm import connect
    from distributed.security import Security

    args = Security().get_connection_args("client")   # what Client uses by default (tls:// from dask's config)

    async def identity():
        comm = await connect(scheduler, timeout=timeout, **args)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="sweep-probe")
    try:
        # wait_for bounds the whole probe; the outer result() is a backstop should the loop itself not return
        info = pool.submit(asyncio.run, asyncio.wait_for(identity(), timeout)).result(timeout + 5)
    except (asyncio.TimeoutError, TimeoutError, concurrent.futures.TimeoutError):
        why = f"no dask handshake within {timeout:g} s"
    except Exception as e:  # noqa: BLE001 - OSError (refused, unreachable), CommClosedError, a garbled reply ...
        why = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'closed'}"
    else:
        kind = info.get("type") if isinstance(info, dict) else None
        why = None if kind == "Scheduler" else (f"it answered as a dask {kind}, not a scheduler" if kind else
                                                 f"it answered {str(info)[:80]!r}, not as a dask scheduler")
    finally:
        pool.shutdown(wait=False)
    if why is not None:
        raise SchedulerUnreachable(f"scheduler {scheduler!r} did not answer as a dask scheduler ({why}); "
                                   f"{_SCHEDULER_HINT}; connect_timeout sets how long to wait")


def open_client(scheduler, n_workers, threads_per_worker, processes, connect_timeout=30.0):
    """``(client, cluster)``: a dask Client of ``scheduler`` (asked first, ``probe_scheduler``; cluster None), or of a
    LocalCluster started for the caller, who closes both."""
    from distributed import Client, LocalCluster  # imported here: importing dask is slow, most users never sweep

    if scheduler is not None:
        if not check_scheduler(scheduler).startswith("inproc://"):   # inproc: this process's own, nothing to ask
            probe_scheduler(scheduler, connect_timeout)
        return Client(scheduler, timeout=connect_timeout), None
    # the scheduler, its dashboard and the workers listen on the loopback interface only: a library should not
    # open a port to the network on a user's machine unless asked (a running cluster is what ``scheduler`` is for)
    # (processes=False: in-process comms, no port but the dashboard's; any free port: sweeps may share a machine)
    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker, processes=processes,
                           dashboard_address="127.0.0.1:0", worker_dashboard_address="127.0.0.1:0",
                           **({"host": "127.0.0.1"} if processes else {}))
    return Client(cluster), cluster
