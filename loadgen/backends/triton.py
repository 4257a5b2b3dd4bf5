"""Triton Inference Server backend over tritonclient gRPC or HTTP: asynchronous requests,
at most ``in_flight`` at once, and the server's own per-model statistics.

gRPC uses the client's ``async_infer`` with a completion callback; HTTP uses ``in_flight``
worker threads, each with its own client."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from typing import Any

import numpy as np

from loadgen.backends.base import Done, Feeds
from loadgen.errors import RunFailed
from loadgen.models import ModelIO

STAT_KINDS = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output")
SPLIT_KINDS = ("queue", "compute_input", "compute_infer", "compute_output")


def _as_int(value: Any) -> int:
    # gRPC statistics arrive as protobuf JSON, where 64-bit integers are strings.
    return int(value) if value not in (None, "") else 0


STATISTICS_SETTLE_S = 0.05
STATISTICS_SETTLE_READS = 40


def summarize_statistics(raw: dict[str, Any], model_name: str) -> dict[str, Any]:
    """Flatten Triton's statistics for one model to integers (counts and nanoseconds)."""
    models = [m for m in raw.get("model_stats", []) if m.get("name") == model_name]
    if not models:
        return {"model_name": model_name, "missing": True}
    model = models[0]
    inference = model.get("inference_stats", {})
    out: dict[str, Any] = {
        "model_name": model_name,
        "version": model.get("version"),
        "inference_count": _as_int(model.get("inference_count")),
        "execution_count": _as_int(model.get("execution_count")),
    }
    for kind in STAT_KINDS:
        entry = inference.get(kind, {})
        out[kind] = {"count": _as_int(entry.get("count")), "ns": _as_int(entry.get("ns"))}
    return out


def statistics_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What the timed run added: after minus before, plus mean microseconds per request."""
    delta: dict[str, Any] = {"model_name": after.get("model_name")}
    for key in ("inference_count", "execution_count"):
        delta[key] = after.get(key, 0) - before.get(key, 0)
    for kind in STAT_KINDS:
        count = after[kind]["count"] - before[kind]["count"]
        ns = after[kind]["ns"] - before[kind]["ns"]
        delta[kind] = {"count": count, "ns": ns, "mean_us": (ns / count / 1000) if count else None}
    return delta


def server_split_us(delta: dict[str, Any]) -> dict[str, float | None]:
    """Where a request's time went on the server during the timed run: mean microseconds
    per request waiting in the queue, copying inputs, inferring and copying outputs."""
    return {kind: delta[kind]["mean_us"] for kind in SPLIT_KINDS}


class TritonBackend:
    name = "triton"

    def __init__(
        self, url: str, protocol: str, model_name: str, in_flight: int, model_io: ModelIO
    ) -> None:
        self.url, self.protocol, self.model_name = url, protocol, model_name
        self.concurrency = in_flight
        self.model_io = model_io
        self._slots = threading.Semaphore(in_flight)
        if protocol == "grpc":
            import tritonclient.grpc as client_module
        else:
            import tritonclient.http as client_module
        from tritonclient.utils import np_to_triton_dtype

        self._module = client_module
        self._triton_dtype = np_to_triton_dtype
        try:
            self.client = client_module.InferenceServerClient(url)
            ready = self.client.is_model_ready(model_name)
            metadata = self.client.get_model_metadata(model_name) if ready else None
        except Exception as exc:
            raise RunFailed(f"Triton at {url} ({protocol}) is not reachable: {exc}") from exc
        if not ready:
            raise RunFailed(f"Triton at {url} has no ready model {model_name!r}: check "
                            f"backend.model_name and the server's model repository")
        self.server_inputs = self._names(metadata, "inputs")
        missing = set(model_io.input_names) - set(self.server_inputs)
        if missing:
            raise RunFailed(f"Triton model {model_name!r} has inputs {self.server_inputs}, not "
                            f"{sorted(missing)}: serve the same model the spec names")
        self.output_names = [t.name for t in model_io.outputs]
        # tritonclient.http runs on gevent, whose connections belong to the thread that made
        # them: each HTTP worker thread owns a client, and ``in_flight`` workers run at once.
        self._http_jobs: queue.Queue[tuple[Feeds, Done] | None] = queue.Queue()
        self._http_workers = [
            threading.Thread(target=self._http_worker, daemon=True, name=f"triton-http-{i}")
            for i in range(in_flight if protocol == "http" else 0)
        ]
        for worker in self._http_workers:
            worker.start()
        self._statistics_before: dict[str, Any] | None = None

    @staticmethod
    def _names(metadata: Any, field: str) -> list[str]:
        if isinstance(metadata, dict):
            return [t["name"] for t in metadata.get(field, [])]
        return [t.name for t in getattr(metadata, field)]

    def _request(self, feeds: Feeds) -> tuple[list[Any], list[Any]]:
        inputs = []
        for name, array in feeds.items():
            tensor = self._module.InferInput(name, list(array.shape),
                                             self._triton_dtype(array.dtype))
            tensor.set_data_from_numpy(np.ascontiguousarray(array))
            inputs.append(tensor)
        outputs = [self._module.InferRequestedOutput(name) for name in self.output_names]
        return inputs, outputs

    def _outputs(self, result: Any) -> list[np.ndarray]:
        return [result.as_numpy(name) for name in self.output_names]

    def infer(self, feeds: Feeds) -> list[np.ndarray]:
        inputs, outputs = self._request(feeds)
        return self._outputs(self.client.infer(self.model_name, inputs, outputs=outputs))

    def submit(self, feeds: Feeds, done: Done) -> None:
        self._slots.acquire()
        try:
            if self.protocol == "grpc":
                inputs, outputs = self._request(feeds)
                self.client.async_infer(self.model_name, inputs, outputs=outputs,
                                        callback=lambda result, error: self._finish_grpc(
                                            result, error, done))
            else:
                self._http_jobs.put((feeds, done))
        except Exception as exc:
            self._slots.release()
            done(None, exc)

    def _finish_grpc(self, result: Any, error: Any, done: Done) -> None:
        self._slots.release()
        if error is not None:
            done(None, error if isinstance(error, BaseException) else RuntimeError(str(error)))
            return
        try:
            outputs = self._outputs(result)
        except Exception as exc:
            done(None, exc)
            return
        done(outputs, None)

    def _http_worker(self) -> None:
        client = None
        while (job := self._http_jobs.get()) is not None:
            feeds, done = job
            try:
                client = client or self._module.InferenceServerClient(self.url)
                inputs, outputs = self._request(feeds)
                result = self._outputs(client.infer(self.model_name, inputs, outputs=outputs))
            except Exception as exc:
                self._slots.release()
                done(None, exc)
                continue
            self._slots.release()
            done(result, None)
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()

    def _raw_statistics(self) -> dict[str, Any]:
        if self.protocol == "grpc":
            return self.client.get_inference_statistics(self.model_name, as_json=True)
        return self.client.get_inference_statistics(self.model_name)

    def mark_statistics_start(self) -> None:
        """Read the counters before the timed run, so warm-up is left out. The server
        counts a request only after it has answered it, so on a busy host the last warm-up
        requests can still be missing: read until two reads in a row agree."""
        before = summarize_statistics(self._raw_statistics(), self.model_name)
        for _ in range(STATISTICS_SETTLE_READS):
            time.sleep(STATISTICS_SETTLE_S)
            again = summarize_statistics(self._raw_statistics(), self.model_name)
            if again.get("inference_count") == before.get("inference_count"):
                break
            before = again
        self._statistics_before = before

    def statistics(self) -> dict[str, Any] | None:
        try:
            after = summarize_statistics(self._raw_statistics(), self.model_name)
        except Exception as exc:
            return {"error": f"could not read server statistics: {exc}"}
        stats: dict[str, Any] = {"cumulative": after}
        if self._statistics_before is not None and not after.get("missing"):
            stats["timed_run"] = statistics_delta(self._statistics_before, after)
            stats["split_us"] = server_split_us(stats["timed_run"])
        return stats

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "url": self.url,
            "protocol": self.protocol,
            "model_name": self.model_name,
            "in_flight": self.concurrency,
            "server_inputs": self.server_inputs,
        }

    def close(self) -> None:
        for _ in self._http_workers:
            self._http_jobs.put(None)
        for worker in self._http_workers:
            worker.join(timeout=10)
        with contextlib.suppress(Exception):
            self.client.close()
