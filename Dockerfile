# CUDA image: from PyPI the torch pin is its CUDA 13.0 build, so the host needs an NVIDIA driver >= 580
# and the NVIDIA Container Toolkit (README, Installation). Mount the model cache and give Ray shared memory:
#   docker build -t masprm .
#   docker run --rm -it --gpus all --shm-size=2g -v "$PWD:/app" \
#     -v "$HOME/.cache/huggingface:/root/.cache/huggingface" masprm
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PYTHONPATH=/app/src PIP_NO_CACHE_DIR=1 \
    HF_HOME=/root/.cache/huggingface
# build-essential: Triton, torch.compile's GPU backend, compiles a small C helper on first use; without a
# C compiler every compile attempt fails (and falls back to eager after paying for the attempt).
RUN apt-get update && apt-get install -y --no-install-recommends build-essential make git libgomp1 \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY requirements.txt .
# The pinned dependencies first (a cached layer); the package itself (requirements.txt's `-e .`) once the
# checkout is copied. PYTHONPATH covers a checkout mounted over /app as well.
RUN grep -v '^-e ' requirements.txt > /tmp/deps.txt && pip install -r /tmp/deps.txt
COPY . .
RUN pip install --no-deps -e .
CMD ["bash"]
