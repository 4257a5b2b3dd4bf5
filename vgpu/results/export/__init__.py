"""Results for other tools: runs as CSV or JSON, an MLPerf Inference submission tree,
comparisons as JUnit XML. The top layer of results: nothing in results imports it."""
