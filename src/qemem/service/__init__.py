"""The HTTP service (extra ``server``): ``create_app`` builds the FastAPI app over ``Memory``."""

from qemem.service.app import create_app

__all__ = ["create_app"]
