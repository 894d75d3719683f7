"""The app the reliability tests' servers run (``uvicorn tests.reliability.served:app``):
``app.main:app`` with the fault hook named by ``RATINGS_FAULT_HOOK`` installed in every
worker process; with the variable unset it is the service's app, untouched."""

from app.main import app
from tests.reliability.faults import install_from_environment

# Before the first request, so before the first connection: the hook's listeners are on
# the Engine class, and see every engine the app makes.
install_from_environment()

__all__ = ["app"]
