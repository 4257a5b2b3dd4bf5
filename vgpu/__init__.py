"""vgpu: declarative vGPU/MIG labs on vSphere, benchmarked with MLPerf LoadGen and judged
against bare metal."""

__version__ = "0.1.0"
