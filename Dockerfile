# The rating service: `docker build -t ratings .` then
#   docker run -p 8000:8000 -v ratings-data:/data ratings
# (SQLite in the /data volume), or see docker-compose.yml for PostgreSQL. The first start
# prints an admin key to the log once; more keys: `docker run ... ratings keys create ...`.
# The project is installed as any package is (`pip install .`, not `-e`): the wheel carries
# the Alembic scripts (app/migrations). It goes into a virtual environment in a build stage,
# and only that environment is copied into the image, never the source tree. Its
# dependencies are the pinned, hash-checked versions of requirements-runtime.lock (no test
# or evaluation packages); the project itself follows without resolving them again, and
# `pip check` stops the build if the lock lacks one.
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY requirements-runtime.lock pyproject.toml README.md ./
COPY app ./app
# The environment gets no pip of its own: the image does not need one to run.
RUN python -m venv --without-pip /opt/ratings \
    && pip --python /opt/ratings/bin/python install --require-hashes -r requirements-runtime.lock \
    && pip --python /opt/ratings/bin/python install --no-deps . \
    && pip --python /opt/ratings/bin/python check

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/ratings/bin:$PATH \
    RATINGS_DATABASE_URL=sqlite:////data/ratings.db \
    RATINGS_HOST=0.0.0.0 \
    RATINGS_PORT=8000

COPY --from=build /opt/ratings /opt/ratings
RUN useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin ratings \
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
