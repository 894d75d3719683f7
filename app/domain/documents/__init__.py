"""The request and response documents of the API (pydantic models), by resource: what the
services take and give, and the routes, the command line and the console send and show.
Below the services, so that every layer above reads them from here."""
