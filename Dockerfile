# pai-launch as a container's CMD: pai-launch itself is PID 1 (exec form, no shell in between), it runs as an
# unprivileged user, and it trains in /work, a volume holding the script, its data and the save folder.
#
#   docker build -t pai-launch .                                  # on a CUDA PyTorch image (the default BASE)
#   docker build --build-arg BASE=python:3.11-slim-bookworm \
#       --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cpu -t pai-launch:cpu .   # CPU only
#   docker run --gpus all --stop-timeout 10 -v "$PWD/job:/work" pai-launch --nproc 8 train.py --epochs 100
#
# BASE may be any Debian-like image: with torch already installed (the CUDA PyTorch images) it is used as it is;
# without, TORCH is installed (from TORCH_INDEX when given). Python comes from the base, or from apt when it has none.
ARG BASE=pytorch/pytorch:2.7.1-cuda12.6-cudnn9-runtime
FROM ${BASE}

ARG TORCH="torch==2.13.0 torchvision==0.28.0"
ARG TORCH_INDEX=""
ARG EXTRAS="perforatedai"

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Python and venv, only when the base has none (a plain Debian base).
# hadolint ignore=DL3008
RUN if ! python3 -c "import venv, ensurepip" 2>/dev/null; then \
        apt-get update && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
        && rm -rf /var/lib/apt/lists/*; \
    fi

COPY pyproject.toml README.md /src/pai-launch/
COPY supervisor /src/pai-launch/supervisor
COPY scripts/constraints.txt /src/pai-launch/constraints.txt

# One venv that sees the base's packages (a CUDA image's torch is reused, never downloaded again). The versions are
# the ones the project is tested with (scripts/constraints.txt). TORCH and EXTRAS are split into words on purpose.
# hadolint ignore=DL3013,SC2086
RUN python3 -m venv --system-site-packages /opt/pai-launch \
    && if /opt/pai-launch/bin/python -c "import torch" 2>/dev/null; then torch_spec=""; else torch_spec="${TORCH}"; fi \
    && /opt/pai-launch/bin/pip install --no-cache-dir --disable-pip-version-check -c /src/pai-launch/constraints.txt \
        ${TORCH_INDEX:+--extra-index-url "${TORCH_INDEX}"} ${torch_spec} ${EXTRAS} /src/pai-launch \
    && /opt/pai-launch/bin/pai-launch --version \
    && useradd --uid 1000 --create-home --home-dir /home/pai --shell /usr/sbin/nologin pai \
    && mkdir -p /work && chown pai:pai /work

ENV PATH=/opt/pai-launch/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PAI_LAUNCH_LOG_FORMAT=json \
    PAI_LAUNCH_GRACE=8

# The unprivileged user, by number (as runAsNonRoot and hosts without this user name understand it).
USER 1000:1000
WORKDIR /work
VOLUME ["/work"]

# `docker stop` sends SIGTERM, waits 10 s (--stop-timeout), then SIGKILLs. pai-launch forwards SIGTERM once to every
# worker, waits PAI_LAUNCH_GRACE (8 s) for them, kills the rest and exits 143 before that. Raise both together:
# -e PAI_LAUNCH_GRACE=60 --stop-timeout 70.
STOPSIGNAL SIGTERM
# No HEALTHCHECK: there is nothing yet that reports the run's health better than the process being alive.

ENTRYPOINT ["pai-launch"]
CMD ["--help"]
