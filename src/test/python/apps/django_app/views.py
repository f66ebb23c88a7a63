import meeting
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


def meet(request):
    """Answers once n requests are in this view at once (see meeting.py), with its thread's name."""
    name = meeting.meet(int(request.GET["n"]))
    return HttpResponse(name) if name else HttpResponse("alone", status=503)
