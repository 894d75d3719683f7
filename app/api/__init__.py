"""The web layer, and only what is HTTP: the routers (``router.api_router`` carries every
``/v1`` route), their dependencies (``deps``, ``security``), the path and query parameters
(``params``), the reads, each declared once with its route and read path (``reads``; their
validators and kept bodies: ``caching``, ``gathering``), the ASGI middleware (``bodies``,
``metrics``, ``ratelimit``), errors as problem+json (``problems``), the request log
(``logs``) and uvicorn's protocol (``protocol``). The request and response documents are
the domain's (``app.domain.documents``)."""
