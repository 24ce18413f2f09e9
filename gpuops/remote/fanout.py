"""Run one operation on many hosts: bounded pool, one outcome per host, input order kept.

One slow or dead host must never block or hide the others, so each host's exception is
captured as its outcome instead of propagating.
"""

MAX_WORKERS = 8


def each_host(hosts, fn, max_workers=MAX_WORKERS):
    """[(host, value_or_exception)] for fn(host) over `hosts`, in the order given."""
    if len(hosts) == 1:
        return [(hosts[0], _call(fn, hosts[0]))]
    # Only here: concurrent.futures brings logging and traceback, ~10 ms a one-host call need not pay.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(max_workers, len(hosts))) as pool:
        futures = [pool.submit(_call, fn, h) for h in hosts]
        return [(h, f.result()) for h, f in zip(hosts, futures)]


def _call(fn, host):
    try:
        return fn(host)
    except Exception as e:  # each host's failure is its own outcome
        return e
