"""The console's pages: server-rendered HTML under ``/console``, read-only.

Each page is one read transaction through the API's own runner (``app.api.deps.run``: the
key check and the services in one trip to the thread pool, on the read replica when there
is one), then a Jinja2 template. The API key comes from a session cookie set by the login
form (``/console/login``) and is checked exactly as the API checks a Bearer key; with
``RATINGS_REQUIRE_READ_KEY`` off no key is asked. Every error is an HTML page with the
status the API would give (a missing or refused key: a redirect to the login form), never
a problem document. Charts are drawn by the page's script (``static/console.js``) from
data the page carries or a JSON read under ``/console``; every table works without it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Coroutine
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from fastapi import APIRouter, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from sqlalchemy.exc import DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.orm import Session

from app.api.deps import NowDep, ladder_of, run
from app.api.security import Access, console_access
from app.config import get_settings
from app.domain.documents.shared import ID_PATTERN, MAX_ID_LENGTH, MAX_PAGE
from app.errors import ProblemError, Unauthorized, validation_detail
from app.services import auth, console, ladders, players, seasons

_log = logging.getLogger(__name__)

HERE = Path(__file__).parent
#: The cookie holding the browser's console session: a random token, never the API key
#: (no expiry: it ends with the browser session, or the server's at 12 hours).
COOKIE = "ratings_console_session"
#: Entries per page of the ladders, the leaderboard and a player's matches.
PAGE = 50
MAX_LIMIT = 200

#: Only what the service itself serves: no inline script or style, no other origin.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    # Pages show what a key may read: not kept by any shared cache, nor by the browser.
    "Cache-Control": "no-store",
}

templates = Jinja2Templates(directory=HERE / "templates")


#: What a figure that does not exist shows (an en dash), and the minus of a change.
NONE = "\u2013"
MINUS = "\u2212"


def _number(value: float | None, digits: int = 2) -> str:
    return NONE if value is None else f"{value:,.{digits}f}"


def _percent(value: float | None, digits: int = 1) -> str:
    return NONE if value is None else f"{100 * value:.{digits}f} %"


def _signed(value: float, digits: int = 2) -> str:
    return f"{value:+,.{digits}f}".replace("-", MINUS)


def _when(value: datetime | None) -> str:
    return NONE if value is None else value.strftime("%Y-%m-%d %H:%M UTC")


def _parameter(value: Any) -> str:
    """A ladder parameter as set, without a float's noise (``4.166666666666667`` shows as
    ``4.16667``; the exact value is in the API)."""
    if isinstance(value, float) and len(repr(value)) > 8:
        return f"{value:.6g}"
    return str(value)


templates.env.filters.update(
    number=_number, percent=_percent, signed=_signed, when=_when, parameter=_parameter
)
templates.env.globals["quote"] = lambda value: quote(value, safe="")


class Static(StaticFiles):
    """The console's stylesheet, script and chart library, with the headers of its pages."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Cache-Control"] = "no-cache"
        return response


static_files = Static(directory=HERE / "static")


# -- pages, errors and access ------------------------------------------------------------------


def _key(request: Request) -> str:
    return request.cookies.get(COOKIE, "")


def page(
    request: Request, template: str, context: dict[str, Any], status_code: int = 200
) -> HTMLResponse:
    """A console page: the template with what every page shows, and the console's headers."""
    return templates.TemplateResponse(
        request,
        template,
        {"signed_in": bool(_key(request)), "crumbs": [], **context},
        status_code=status_code,
        headers=HEADERS,
    )


def error_page(request: Request, status: int, title: str, detail: str) -> HTMLResponse:
    return page(request, "error.html", {"title": title, "detail": detail}, status_code=status)


#: Why the login form is shown, by the code its URL carries (never text from the URL: a
#: link could otherwise put any words on this service's page).
REASONS = {"refused": "That key is unknown or revoked: enter another."}


def _to_login(request: Request) -> RedirectResponse:
    # The path as the browser sent it (still percent-encoded): a player id with "%20" in it
    # must come back as that id, not as the decoded one.
    raw_path = request.scope.get("raw_path") or request.url.path.encode()
    target = raw_path.decode("latin-1") + (f"?{request.url.query}" if request.url.query else "")
    refused = bool(_key(request))  # a key the check refused: forget it
    query = {"next": target, **({"reason": "refused"} if refused else {})}
    response = RedirectResponse(f"/console/login?{urlencode(query)}", status_code=303)
    if refused:
        response.delete_cookie(COOKIE, path="/console")
    return response


class ConsoleRoute(APIRoute):
    """A console route: its errors are HTML pages (a refused key: the login form), not
    the API's problem documents; a JSON read (``.json``) answers a refused key with 401."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        wants_json = self.path.endswith(".json")

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except Unauthorized as exc:
                if wants_json:
                    return JSONResponse({"detail": exc.detail}, status_code=401, headers=HEADERS)
                return _to_login(request)
            except ProblemError as exc:
                if wants_json:
                    return JSONResponse(
                        {"detail": exc.detail}, status_code=exc.status, headers=HEADERS
                    )
                return error_page(request, exc.status, exc.title, exc.detail)
            except RequestValidationError as exc:
                return error_page(
                    request, 422, "Unprocessable Content", validation_detail(exc.errors())
                )
            except (OperationalError, InterfaceError, DisconnectionError) as exc:
                _log.warning("database unavailable: %s", type(exc).__name__)
                return error_page(
                    request, 503, "Service Unavailable", "The database is unavailable or busy."
                )

        return route


router = APIRouter(prefix="/console", route_class=ConsoleRoute, include_in_schema=False)


def access(request: Request) -> Access:
    """The access of a console request: the session's key, checked in the page's
    transaction; none needed while reads are open (a 401 at once where one is needed)."""
    return console_access(_key(request), request)


async def read(request: Request, work: Callable[[Session], Any]) -> Any:
    """``work`` in one read transaction with the session's key checked (the API's runner)."""
    return await run(access(request), work)


LadderId = Annotated[str, PathParam(min_length=1, max_length=64)]
PlayerId = Annotated[str, PathParam(min_length=1, max_length=MAX_ID_LENGTH, pattern=ID_PATTERN)]
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT)]
Cursor = Annotated[str | None, Query(max_length=1024)]


# -- the pages ---------------------------------------------------------------------------------


@router.get("", response_class=HTMLResponse)
async def ladders_page(request: Request, limit: Limit = PAGE, cursor: Cursor = None) -> Response:
    found = await read(
        request, lambda session: ladders.list_ladders(session=session, limit=limit, cursor=cursor)
    )
    return page(
        request, "ladders.html", {"page": found, "limit": limit, "first_page": cursor is None}
    )


@router.get("/ladders/{ladder}", response_class=HTMLResponse)
async def ladder_page(
    request: Request,
    ladder: LadderId,
    limit: Limit = PAGE,
    cursor: Cursor = None,
    player: Annotated[str | None, Query(max_length=MAX_ID_LENGTH)] = None,
    season: Annotated[str | None, Query(max_length=MAX_ID_LENGTH)] = None,
) -> Response:
    search = player if player and player.strip() else ""

    def work(session: Session) -> dict[str, Any]:
        row = ladder_of(session, ladder)
        out: dict[str, Any] = {"ladder": console.ladder_summary(session=session, ladder=row)}
        listed = seasons.list_seasons(session=session, ladder=row, limit=MAX_PAGE, cursor=None)
        out["seasons"] = listed.entries
        out["archive"] = None
        if season and season != row.season:
            # A closed season's archived standings (an unknown one: the 404 page).
            board = seasons.standings(
                session=session, ladder=row, season=season, limit=limit, cursor=cursor
            )
            out["archive"] = season
            out["entries"] = board.entries
            out["next_cursor"] = board.next_cursor
        elif search:
            # The id exactly as typed, else without the spaces a paste brings along.
            found = console.find_player(session=session, ladder=row, player_id=search)
            if found is None and search.strip() != search:
                found = console.find_player(session=session, ladder=row, player_id=search.strip())
            out["entries"] = [found] if found is not None else []
            out["next_cursor"] = None
        else:
            # Operators see everyone: provisional players too, marked.
            board = players.leaderboard(
                session=session,
                ladder=row,
                limit=limit,
                cursor=cursor,
                min_matches=0,
                include_provisional=True,
            )
            out["entries"] = board.entries
            out["next_cursor"] = board.next_cursor
            out["as_of"] = board.as_of
        return out

    context = await read(request, work)
    return page(
        request,
        "ladder.html",
        {
            **context,
            "search": search,
            "limit": limit,
            "first_page": cursor is None,
            "season_query": f"&season={quote(context['archive'], safe='')}"
            if context["archive"]
            else "",
            "crumbs": [(context["ladder"].id, None)],
        },
    )


@router.get("/ladders/{ladder}/players/{player_id}", response_class=HTMLResponse)
async def player_page(
    request: Request,
    ladder: LadderId,
    player_id: PlayerId,
    limit: Limit = PAGE,
    cursor: Cursor = None,
) -> Response:
    def work(session: Session) -> dict[str, Any]:
        row = ladder_of(session, ladder)
        return {
            "ladder": console.ladder_summary(session=session, ladder=row),
            "player": players.get_player(session=session, ladder=row, player_id=player_id),
            "history": console.match_history(
                session=session, ladder=row, player_id=player_id, limit=limit, cursor=cursor
            ),
        }

    context = await read(request, work)
    ladder_id = context["ladder"].id
    return page(
        request,
        "player.html",
        {
            **context,
            "limit": limit,
            "first_page": cursor is None,
            "chart_src": f"/console/ladders/{ladder_id}/players/{quote(player_id, safe='')}"
            "/trajectory.json",
            "crumbs": [(ladder_id, f"/console/ladders/{ladder_id}"), (player_id, None)],
        },
    )


@router.get("/ladders/{ladder}/players/{player_id}/trajectory.json")
async def trajectory(request: Request, ladder: LadderId, player_id: PlayerId) -> Response:
    """The player's whole trajectory as arrays (the player page's chart reads it)."""
    found = await read(
        request,
        lambda session: console.trajectory(
            session=session, ladder=ladder_of(session, ladder), player_id=player_id
        ),
    )
    return JSONResponse(found.as_json(), headers=HEADERS)


@router.get("/ladders/{ladder}/health", response_class=HTMLResponse)
async def health_page(request: Request, ladder: LadderId) -> Response:
    def work(session: Session) -> dict[str, Any]:
        row = ladder_of(session, ladder)
        return {
            "ladder": console.ladder_summary(session=session, ladder=row),
            "health": console.prediction_health(session=session, ladder=row),
        }

    context = await read(request, work)
    ladder_id = context["ladder"].id
    return page(
        request,
        "health.html",
        {
            **context,
            "charts": _health_charts(context["health"]),
            "crumbs": [(ladder_id, f"/console/ladders/{ladder_id}"), ("Prediction health", None)],
        },
    )


def _health_charts(health: console.Health) -> dict[str, str]:
    """The health page's chart data, as JSON for its ``data-series`` attributes (no inline
    script: the page's policy allows none)."""
    calibration = [b for b in health.overall.calibration if b.count]
    tallies = [period.tally for period in health.periods]
    series = {
        "calibration": {
            "x": [b.mean_predicted for b in calibration],
            "y": [b.observed for b in calibration],
        },
        "periods": {
            "x": list(range(1, len(tallies) + 1)),
            "error": [t.prediction_error() for t in tallies],
            "log_loss": [t.log_loss() for t in tallies],
        },
        "draws": {"x": health.curve_x, "y": health.curve_y},
    }
    return {name: json.dumps(data, separators=(",", ":")) for name, data in series.items()}


# -- signing in and out ------------------------------------------------------------------------


def _next_page(target: str | None) -> str:
    """Where to go after signing in: a console page of this service, nowhere else."""
    if target and target.startswith("/console") and not target.startswith("//"):
        return target
    return "/console"


@router.get("/login", response_class=HTMLResponse)
async def login_form(
    request: Request,
    next_page: Annotated[str | None, Query(alias="next", max_length=2048)] = None,
    reason: Annotated[str | None, Query(max_length=32)] = None,
) -> Response:
    return page(
        request,
        "login.html",
        {
            "next": _next_page(next_page),
            "message": REASONS.get(reason or ""),
            "required": get_settings().require_read_key,
        },
    )


def _from_this_console(request: Request) -> bool:
    """Whether a form was posted from this service's own pages: the browser says so
    (``Sec-Fetch-Site: same-origin``), or its ``Origin`` (or, without one, its ``Referer``)
    names the host the request was sent to. Browsers send them with every form post, so a
    page of another site cannot sign a visitor in or out (login CSRF); a request with none
    of them is refused too."""
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None:
        return fetch_site == "same-origin"
    origin = request.headers.get("origin") or request.headers.get("referer") or ""
    host = request.headers.get("host", "")
    return bool(host) and origin != "null" and urlsplit(origin).netloc == host


def _cross_site(request: Request) -> HTMLResponse:
    return error_page(request, 403, "Forbidden", "Sign in and out from this console's own pages.")


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request, now: NowDep) -> Response:
    """Check the key as the API would for a read; start a console session, whose token
    (never the key) the cookie keeps."""
    if not _from_this_console(request):
        return _cross_site(request)
    form = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
    key = form.get("key", "").strip()
    target = _next_page(form.get("next"))
    context = {"next": target, "required": get_settings().require_read_key}
    if not key:
        return page(request, "login.html", {**context, "message": "Enter a key."}, 400)
    token = await run(
        Access(None, "write"), lambda session: auth.sign_in(session, key=key, now=now)
    )
    if token is None:
        message = "That key is unknown or revoked."
        return page(request, "login.html", {**context, "message": message}, 401)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        COOKIE,
        token,
        path="/console",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    """End the session: its token reads no more, wherever a copy of the cookie is."""
    if not _from_this_console(request):
        return _cross_site(request)
    token = _key(request)
    if token:
        await run(Access(None, "write"), lambda session: auth.sign_out(session, token=token))
    response = RedirectResponse("/console/login", status_code=303)
    response.delete_cookie(COOKIE, path="/console")
    return response


@router.get("/{rest:path}", response_class=HTMLResponse)
async def unknown_page(request: Request, rest: str) -> Response:
    if rest == "":  # "/console/": the ladders
        return RedirectResponse("/console", status_code=308)
    return error_page(request, 404, "Not Found", f"No console page at {request.url.path}.")
