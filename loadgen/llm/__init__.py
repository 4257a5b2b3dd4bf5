"""The LLM token workload: a LoadGen SUT that reports the first token and the token count
of every answer, with engines in-process (ONNX Runtime, torch) or over HTTP (an
OpenAI-compatible streaming endpoint). Importing this package imports nothing else."""
