from django.db import models


class World(models.Model):
    randomnumber = models.IntegerField()

    class Meta:
        managed = False
        db_table = "world"


class Fortune(models.Model):
    message = models.CharField(max_length=2048)

    class Meta:
        managed = False
        db_table = "fortune"
