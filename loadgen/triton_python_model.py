"""Triton python-backend model that runs the ONNX file next to it with onnxruntime.

This file is copied into a model repository as ``<model>/1/model.py`` and runs inside
Triton's python backend stub (module ``triton_python_backend_utils`` exists only there). It
lets machines without Triton's onnxruntime backend serve the same ONNX model: requests
that Triton's dynamic batcher groups are concatenated into one session run.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        threads = config.get("parameters", {}).get("intra_op_threads", {}).get("string_value")
        options = ort.SessionOptions()
        options.intra_op_num_threads = int(threads or 0)
        options.inter_op_num_threads = 1
        path = os.path.join(args["model_repository"], args["model_version"], "model.onnx")
        self.session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]

    def execute(self, requests: list[Any]) -> list[Any]:
        per_request = [
            {name: pb_utils.get_input_tensor_by_name(request, name).as_numpy()
             for name in self.input_names}
            for request in requests
        ]
        sizes = [feeds[self.input_names[0]].shape[0] for feeds in per_request]
        batch = {name: np.concatenate([feeds[name] for feeds in per_request])
                 for name in self.input_names}
        outputs = self.session.run(self.output_names, batch)
        responses = []
        start = 0
        for size in sizes:
            tensors = [pb_utils.Tensor(name, np.ascontiguousarray(out[start:start + size]))
                       for name, out in zip(self.output_names, outputs, strict=True)]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
            start += size
        return responses

    def finalize(self) -> None:
        self.session = None
