"""bench/free-threaded's Starlette app: `GET /` says hello, `GET /cpu` spends about 20 ms of pure Python
(on 3.13t, on the machine of docs/BENCHMARKS.md) in a loop over local variables only, so that threads running it
share no object and nothing but the interpreter can keep them from running in parallel. `?n=` changes the
number of iterations (CPU_LOOPS by default)."""

from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

CPU_LOOPS = 220_000


def spin(n: int) -> int:
    """A loop of integer arithmetic on local variables: about 0.1 µs an iteration."""
    acc = 0
    for i in range(n):
        acc = (acc * 31 + i) % 1_000_003
    return acc


async def homepage(request):
    return PlainTextResponse("hello, world")


async def cpu(request):
    n = int(request.query_params.get("n", CPU_LOOPS))
    return PlainTextResponse(str(spin(n)))


app = Starlette(routes=[Route("/", homepage), Route("/cpu", cpu)])
