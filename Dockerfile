# CUDA image: from PyPI the torch pin is its CUDA 13.0 build, so the host needs an NVIDIA driver >= 580
# and the NVIDIA Container Toolkit (README, Installation). Run it as yourself, so the files it writes into the
# mounted checkout are yours; mount the model cache and give Ray shared memory:
#   docker build -t masprm .
#   docker run --rm -it --gpus all --shm-size=2g --user "$(id -u):$(id -g)" -v "$PWD:/app" \
#     -v "$HOME/.cache/huggingface:/cache/huggingface" masprm
# A pinned base (Python 3.11 patch release and Debian release), so a rebuild gets the same system.
FROM python:3.11.13-slim-bookworm
# HOME, the model cache and matplotlib's cache are writable by any user id: `docker run --user` with the
# host's ids finds a home, and the image's own user (masprm, uid 1000) is the default.
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PYTHONPATH=/app/src PIP_NO_CACHE_DIR=1 \
    HOME=/home/masprm HF_HOME=/cache/huggingface MPLCONFIGDIR=/tmp/matplotlib
# build-essential: Triton, torch.compile's GPU backend, compiles a small C helper on first use; without a
# C compiler every compile attempt fails (and falls back to eager after paying for the attempt).
RUN apt-get update && apt-get install -y --no-install-recommends build-essential make git libgomp1 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 1000 --shell /bin/bash masprm \
    && mkdir -p /app /cache/huggingface && chown 1000:1000 /app \
    && chmod 1777 /home/masprm /cache /cache/huggingface
WORKDIR /app
COPY requirements.txt .
# The pinned dependencies first (a cached layer); the package itself (requirements.txt's `-e .`) once the
# checkout is copied. PYTHONPATH covers a checkout mounted over /app as well.
RUN grep -v '^-e ' requirements.txt > /tmp/deps.txt && pip install -r /tmp/deps.txt
# Owned by the image's user as it is copied: a `chown -R` afterwards would store every file a second time.
COPY --chown=1000:1000 . .
RUN pip install --no-deps -e .
# masprm, by its uid (a name may not resolve under `docker run --user`)
USER 1000
CMD ["bash"]
