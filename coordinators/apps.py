from django.apps import AppConfig


class CoordinatorsConfig(AppConfig):
    name = "coordinators"
    default_auto_field = "django.db.models.BigAutoField"
