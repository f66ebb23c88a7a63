import threading

from django.http import HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt


def info(request, rest=""):
    return JsonResponse(
        {
            "path": request.path,
            "method": request.method,
            "query": request.GET.dict(),
            "script_name": request.META.get("SCRIPT_NAME", ""),
        }
    )


@csrf_exempt
def post_data(request):
    return JsonResponse(
        {
            "method": request.method,
            "post": {k: request.POST.getlist(k) for k in request.POST},
            "content_type": request.content_type,
        }
    )


@csrf_exempt
def echo(request):
    return HttpResponse(request.body, content_type="application/octet-stream")


_meetings = {}
_meetings_lock = threading.Lock()


def meet(request):
    """Blocks until n requests are in this view at once, then answers with its thread's name: only n
    threads running the application at the same time can all be answered."""
    n = int(request.GET["n"])
    with _meetings_lock:
        barrier = _meetings.setdefault(n, threading.Barrier(n))
    try:
        barrier.wait(timeout=20)
    except threading.BrokenBarrierError:
        return HttpResponse("alone", status=503)
    return HttpResponse(threading.current_thread().name)
