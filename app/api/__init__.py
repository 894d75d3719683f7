"""The web layer: the routers (``router.api_router`` carries every ``/v1`` route), their
dependencies (``deps``, ``security``), the request and response bodies (``schemas``) and
the ASGI middleware (``metrics``, ``ratelimit``, ``retry``)."""
