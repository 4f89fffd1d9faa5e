"""moto's S3 server, as `moto_server ARGS` runs it, with each PUT of an
object checked and written as one step.

S3 judges a conditional PUT (If-None-Match: *, If-Match) and writes the
object atomically. moto 5 checks the condition and then writes, and its
server answers each request on a thread of its own: two PUTs with
If-None-Match: * arriving together can both pass the check. A lock around
its PUT makes it keep the promise S3 keeps, which the site disruption
budgets' leases rest on (tests/budget.rs); nothing else of moto changes.
"""
import sys
import threading

# This directory holds moto.py, the tests' client: not the package.
sys.path.pop(0)

from moto.s3.responses import S3Response

_lock = threading.Lock()
_put_object = S3Response.put_object


def put_object(self, *args, **kwargs):
    with _lock:
        return _put_object(self, *args, **kwargs)


S3Response.put_object = put_object

from moto.server import main  # noqa: E402

main(sys.argv[1:])
