# The vgpu node-harness image: MLPerf LoadGen + ONNX Runtime + the `loadgen` package.
#
# Built by vgpu (vgpu.container.images.write_build_context puts this file, the pinned
# requirements and loadgen/ in one folder):
#   docker build -f Dockerfile --build-arg BASE_IMAGE=... --build-arg ORT_PACKAGE=... .
#
# The harness lives in a venv at /opt/harness, so the same interpreter path works on NGC
# bases (which ship `python`) and on Debian ones (`python3` only, pip blocked by PEP 668).
# The venv sees the base's site-packages, so NGC's CUDA torch stays importable for
# `loadgen train`; the pinned packages installed into the venv take precedence.
# The base's ENTRYPOINT (NGC: /opt/nvidia/nvidia_entrypoint.sh) is kept on purpose: it sets
# up CUDA forward compatibility. It may print a banner on stdout before the harness starts.
# vgpu passes BASE_IMAGE: for a vSphere guest the NGC release whose CUDA the guest driver
# branch runs natively (vgpu.container.images.NGC_BASES: R535 -> 23.10 / CUDA 12.2, R550 ->
# 24.05 / 12.4, R570 -> 25.03 / 12.8), since forward compatibility cannot be counted on in
# a vGPU guest; the default below is for builds where the driver is not known.
ARG BASE_IMAGE=nvcr.io/nvidia/pytorch:24.10-py3
FROM ${BASE_IMAGE}

ARG ORT_PACKAGE=onnxruntime-gpu
ARG ORT_VERSION=1.23.2

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

RUN set -eu; \
    py="$(command -v python3 || command -v python)"; \
    "$py" -m venv --system-site-packages /opt/harness; \
    /opt/harness/bin/python -m pip --version

# A package mirror (PIP_INDEX_URL) and a CA bundle for it or for a TLS-inspecting proxy
# (pip-ca.pem, empty unless vgpu was given one; it replaces pip's own bundle) are optional.
ARG PIP_INDEX_URL=
COPY harness-requirements.txt pip-ca.pem /opt/harness/
# PIP_CONSTRAINT is cleared for the lock: NGC's constraint pins every package of the base
# (psutil, protobuf, ...) and would refuse the lock's own pins; only its numpy is kept
# (below). The requirements are a lock (every package pinned with its hashes,
# scripts/lock.sh); ONNX Runtime, CPU or GPU build, comes on top of it without
# dependencies of its own: the lock holds them.
RUN set -eu; \
    if [ -s /opt/harness/pip-ca.pem ]; then export PIP_CERT=/opt/harness/pip-ca.pem; fi; \
    pip="/opt/harness/bin/python -m pip install ${PIP_INDEX_URL:+--index-url $PIP_INDEX_URL}"; \
    PIP_CONSTRAINT= $pip --require-hashes -r /opt/harness/harness-requirements.txt; \
    PIP_CONSTRAINT= $pip --no-deps "${ORT_PACKAGE}==${ORT_VERSION}"

# NGC's torch is built against the numpy its constraint (/etc/pip/constraint.txt) pins, a
# 1.x; the lock's numpy 2 in the venv would shadow it and break torch.from_numpy. Where the
# base has a numpy, the venv's goes and the base's is used; torch must then work with it.
# (The lines between the markers are run as they are by tests/container/test_base_numpy.py.)
# keep-base-numpy: begin
RUN set -eu; \
    py="$(command -v python3 || command -v python)"; \
    if "$py" -c 'import numpy' 2>/dev/null; then \
        /opt/harness/bin/python -m pip uninstall --yes --quiet numpy; \
        /opt/harness/bin/python -c 'import numpy, sys; print("numpy", numpy.__version__, \
            "of the base:", numpy.__file__); sys.exit("/opt/harness/" in numpy.__file__)'; \
    fi; \
    if /opt/harness/bin/python -c 'import torch' 2>/dev/null; then \
        /opt/harness/bin/python -c 'import numpy, torch; assert torch.from_numpy(numpy.ones(2)).sum().item() == 2.0'; \
    fi
# keep-base-numpy: end

# Declared late: a new harness version must not invalidate the pip layer above.
ARG HARNESS_VERSION=unknown
COPY loadgen /opt/harness/src/loadgen
RUN set -eu; \
    site="$(/opt/harness/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"; \
    echo /opt/harness/src > "$site/vgpu-harness.pth"; \
    /opt/harness/bin/python -m loadgen --version

ENV PATH=/opt/harness/bin:${PATH} \
    VGPU_HARNESS_PYTHON=/opt/harness/bin/python
LABEL vgpu.harness.version="${HARNESS_VERSION}" \
      vgpu.harness.ort-package="${ORT_PACKAGE}" \
      vgpu.harness.ort-version="${ORT_VERSION}"
WORKDIR /work
