# The rating service: `docker build -t ratings .` then
#   docker run -p 8000:8000 -v ratings-data:/data ratings
# (SQLite in the /data volume), or see docker-compose.yml for PostgreSQL. The first start
# prints an admin key to the log once; more keys: `docker run ... ratings keys create ...`.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    RATINGS_DATABASE_URL=sqlite:////data/ratings.db \
    RATINGS_HOST=0.0.0.0 \
    RATINGS_PORT=8000

WORKDIR /srv/ratings

# The Alembic scripts are read from the source tree at run time, so the project is installed
# in place (-e) rather than copied into site-packages without its migrations.
COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY migrations ./migrations
RUN pip install -e . \
    && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin ratings \
    && mkdir -p /data \
    && chown ratings:ratings /data

USER ratings
VOLUME ["/data"]
EXPOSE 8000

# The slim image has no curl: ask /healthz with the standard library.
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('RATINGS_PORT', '8000'), timeout=4)"]

ENTRYPOINT ["ratings"]
CMD ["serve", "--host", "0.0.0.0"]
