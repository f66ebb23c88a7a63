"""The TechEmpower test types in Django, through its ORM and its template language (see ../README.md)."""
from django.http import HttpResponse
from django.template.loader import get_template

from workload_rules import (ADDED_FORTUNE, HELLO, by_message, distinct_ids, dumps, query_count, random_id,
                            random_number)

from .models import Fortune, World

fortunes_template = get_template("fortunes.html")


def json_response(value) -> HttpResponse:
    return HttpResponse(dumps(value), content_type="application/json")


def index(request):
    return HttpResponse("ok", content_type="text/plain")


def json_message(request):
    return json_response({"message": HELLO})


def plaintext(request):
    return HttpResponse(HELLO, content_type="text/plain")


def single_query(request):
    world = World.objects.get(id=random_id())
    return json_response({"id": world.id, "randomNumber": world.randomnumber})


def multiple_queries(request):
    n = query_count(request.GET.get("queries"))
    worlds = [World.objects.get(id=random_id()) for _ in range(n)]
    return json_response([{"id": w.id, "randomNumber": w.randomnumber} for w in worlds])


def fortunes(request):
    messages = list(Fortune.objects.all())
    messages.append(Fortune(id=0, message=ADDED_FORTUNE))
    messages.sort(key=by_message)
    return HttpResponse(fortunes_template.render({"fortunes": messages}))


def updates(request):
    worlds = [World.objects.get(id=world_id) for world_id in distinct_ids(query_count(request.GET.get("queries")))]
    for world in worlds:
        world.randomnumber = random_number()
    # One UPDATE ... CASE statement for all the rows (atomic on its own in autocommit mode).
    World.objects.bulk_update(worlds, ["randomnumber"])
    return json_response([{"id": w.id, "randomNumber": w.randomnumber} for w in worlds])
