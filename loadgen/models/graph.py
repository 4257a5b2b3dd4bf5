"""A small helper to assemble ONNX graphs with seeded numpy weights."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17

_ONNX_TYPE = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16}


class GraphBuilder:
    """Collects nodes and initializers; weights are drawn in bulk from one seeded generator."""

    def __init__(self, seed: int, dtype: np.dtype) -> None:
        self.rng = np.random.default_rng(seed)
        self.dtype = np.dtype(dtype)
        self.onnx_dtype = _ONNX_TYPE[self.dtype]
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._count = 0

    def _name(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def weight(self, hint: str, shape: tuple[int, ...], std: float) -> str:
        values = self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std)
        return self.const(values.astype(self.dtype), hint)

    def const(self, values: np.ndarray, hint: str = "const") -> str:
        name = self._name(hint)
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(values), name))
        return name

    def scalar(self, value: float) -> str:
        return self.const(np.array(value, dtype=self.dtype), "scalar")

    def node(self, op: str, inputs: list[str], outputs: int = 1, **attrs: object) -> list[str]:
        names = [self._name(op.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, names, name=self._name(op), **attrs))
        return names

    def op(self, op: str, *inputs: str, **attrs: object) -> str:
        return self.node(op, list(inputs), 1, **attrs)[0]

    def op_named(self, op: str, inputs: list[str], name: str, **attrs: object) -> str:
        self.nodes.append(helper.make_node(op, inputs, [name], name=self._name(op), **attrs))
        return name

    def model(
        self,
        name: str,
        inputs: list[onnx.ValueInfoProto],
        outputs: list[onnx.ValueInfoProto],
        metadata: dict[str, str],
    ) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.initializers)
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", OPSET)],
            producer_name="vgpu-harness",
        )
        model.ir_version = 8
        helper.set_model_props(model, metadata)
        return model
