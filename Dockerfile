# tuisched headless (--no-ui) in a container, as a non-root user.
#
#   docker build -t tuisched .
#   docker run -d --name tuisched \
#     -v "$PWD/tuisched.yaml:/etc/tuisched/tuisched.yaml:ro" \
#     -v tuisched-state:/var/lib/tuisched \
#     tuisched
#
# The configuration is read from /etc/tuisched/tuisched.yaml ($TUISCHED_CONFIG).
# The state (history, audit log, run output) goes to the volume
# /var/lib/tuisched ($XDG_STATE_HOME=/var/lib): with settings.state_dir left out of
# the file, in the configuration's own folder there (configs/tuisched-tuisched-HASH). `docker stop` sends SIGTERM: the scheduler drains
# (settings.shutdown_grace), so give it time: docker stop -t 40.
# `docker kill -s HUP tuisched` reloads the configuration.
# The image has the `postgres` extra (psycopg with libpq): a container is a usual cluster
# node (settings.cluster), and a postgresql:// settings.history works too.

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    TUISCHED_CONFIG=/etc/tuisched/tuisched.yaml \
    XDG_STATE_HOME=/var/lib

WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY tuisched ./tuisched
RUN pip install '.[postgres]' && rm -rf /src

# A fixed uid, so a bind-mounted state folder can be given to it (chown 10001).
RUN useradd --system --uid 10001 --create-home --home-dir /home/tuisched tuisched \
    && mkdir -p /var/lib/tuisched /etc/tuisched \
    && chown tuisched:tuisched /var/lib/tuisched && chmod 0700 /var/lib/tuisched

USER tuisched
WORKDIR /var/lib/tuisched
VOLUME ["/var/lib/tuisched"]
STOPSIGNAL SIGTERM

ENTRYPOINT ["tuisched"]
CMD ["--no-ui"]
