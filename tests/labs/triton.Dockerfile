# A Triton Inference Server image for tests, laid out as NGC's tritonserver images are
# (/opt/tritonserver/bin/tritonserver, /opt/tritonserver/backends/...), so vgpu deploys it
# exactly as it deploys nvcr.io/nvidia/tritonserver. The server is the binary from the
# nvidia-pytriton wheel: CPU only, with the python backend and no onnxruntime backend, so
# vgpu serves its models through onnxruntime inside the python backend.
#
# Built FROM the docker lab's Debian base by tests/labs/tritonimage.py.
ARG BASE_IMAGE=vgpu-test-base:bookworm
FROM ${BASE_IMAGE}

ARG PYTRITON_VERSION=0.7.0
ARG ORT_VERSION=1.23.2

ENV DEBIAN_FRONTEND=noninteractive \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# The python backend stub links libpython3.x.so, which Debian ships apart from python3.
RUN set -eu; \
    apt-get update; \
    apt-get install -y --no-install-recommends "libpython$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"; \
    rm -rf /var/lib/apt/lists/*

# pip-ca.pem: the CA bundle pip on the build machine trusts (empty: pip's own).
COPY pip-ca.pem /opt/triton-ca.pem
RUN set -eu; \
    if [ -s /opt/triton-ca.pem ]; then export PIP_CERT=/opt/triton-ca.pem; fi; \
    python3 -m venv /opt/triton; \
    /opt/triton/bin/python -m pip install "nvidia-pytriton==${PYTRITON_VERSION}" \
        "onnxruntime==${ORT_VERSION}"

# The wheel ships the python backend stub per Python version apart from the backend.
RUN set -eu; \
    site="$(/opt/triton/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"; \
    version="$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"; \
    home="$site/pytriton/tritonserver"; \
    cp "$home/python_backend_stubs/$version/triton_python_backend_stub" "$home/backends/python/"; \
    ln -s "$home" /opt/tritonserver; \
    ln -s "$site/nvidia_pytriton.libs" /opt/tritonserver-libs; \
    test -x /opt/tritonserver/bin/tritonserver

COPY triton-entrypoint.sh /opt/triton/entrypoint.sh
# The python backend stub runs the interpreter found first on PATH: the venv's, which
# has onnxruntime and numpy.
ENV PATH=/opt/triton/bin:/opt/tritonserver/bin:${PATH} \
    LD_LIBRARY_PATH=/opt/tritonserver-libs
ENTRYPOINT ["/opt/triton/entrypoint.sh"]
CMD ["tritonserver", "--model-repository=/models"]
