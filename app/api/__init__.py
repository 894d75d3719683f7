"""The web layer, and only what is HTTP: the routers (``router.api_router`` carries every
``/v1`` route), their dependencies (``deps``, ``security``), the read path (``reads``), the
ASGI middleware (``bodies``, ``metrics``, ``ratelimit``), errors as problem+json
(``problems``), the request log (``logs``) and uvicorn's protocol (``protocol``). The
request and response documents are the domain's (``app.domain.documents``)."""
