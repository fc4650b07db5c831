# One image for all of ringleader: the operator, the training runtime and the in-cluster MLflow server.
#
#   ringleader operator                 the Helm chart's operator Deployment (ENTRYPOINT + args)
#   python -m ringleader.runtime        training pods (the topology templates set this command)
#   mlflow server ...                   the chart's optional MLflow Deployment (command: [mlflow])
#
# Build:
#   docker build -t ringleader:0.1.0 .                                  # python:3.11-slim base
#   cluster/build-image.sh Dockerfile . localhost/ringleader/ringleader:0.1.0
#                                       # the test cluster: a locally built Debian base passed as BASE_IMAGE
# Build arguments:
#   BASE_IMAGE       any Debian-like image with python3 (>= 3.11) and its venv module
#   EXTRA_PACKAGES   more pip packages, e.g. psycopg2-binary for an MLflow server on PostgreSQL: not in the
#                    lock (their own versions float, name them pinned), and they cannot move a locked one
# Every dependency comes from requirements-runtime.lock (`make lock`), hash-checked: the image, the venv and
# CI get the same versions. torch is PyPI's build (CUDA wheels on x86_64 Linux).
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ARG EXTRA_PACKAGES=""

# A virtual environment works on both bases: Debian's own python3 refuses system-wide pip installs (PEP 668).
ENV VIRTUAL_ENV=/opt/ringleader \
    PATH=/opt/ringleader/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/home/ringleader \
    MPLCONFIGDIR=/tmp/matplotlib

RUN python3 -m venv "$VIRTUAL_ENV" \
 && groupadd --gid 1000 ringleader \
 && useradd --uid 1000 --gid 1000 --home-dir /home/ringleader --create-home --shell /usr/sbin/nologin ringleader

WORKDIR /src
# Dependencies first, from the lock alone, so that a code change rebuilds only the last layers instead of
# downloading torch and mlflow again. --no-deps: the lock is complete.
COPY requirements-runtime.lock ./
RUN pip install --require-hashes --no-deps -r requirements-runtime.lock \
 && if [ -n "$EXTRA_PACKAGES" ]; then \
      sed -E '/^[[:space:]]*(#|--hash)/d; s/[[:space:]]*\\$//' requirements-runtime.lock > /tmp/constraints.txt \
      && pip install -c /tmp/constraints.txt ${EXTRA_PACKAGES} && rm /tmp/constraints.txt; fi

# The package itself: .dockerignore lets in only the lock, pyproject.toml, README.md and operator/.
COPY . ./
RUN pip install --no-deps --no-build-isolation . \
 && cd / && rm -rf /src \
 && python -c "import ringleader.controller.cli, ringleader.topology, ringleader.contract.environment"

# MLflow 3 phones home at import unless told not to; pods talk only to the cluster. Caches go to /tmp,
# the one writable place under a read-only root filesystem.
ENV MLFLOW_DISABLE_TELEMETRY=true \
    DO_NOT_TRACK=true \
    XDG_CACHE_HOME=/tmp/.cache

# Non-root, numeric so that Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 1000:1000
WORKDIR /home/ringleader
ENTRYPOINT ["ringleader"]
CMD ["--help"]
