"""A meeting point for the tests of worker threads: a request that waits, blocking its thread, until n
requests are in at once. Only n threads running the application at the same time can all get through."""
import threading

_barriers = {}
_lock = threading.Lock()


def meet(n, timeout=20):
    """The name of the calling thread once n callers are in, or None if they were not within timeout."""
    with _lock:
        barrier = _barriers.setdefault(n, threading.Barrier(n))
    try:
        barrier.wait(timeout=timeout)
    except threading.BrokenBarrierError:
        return None
    return threading.current_thread().name
