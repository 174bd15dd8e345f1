"""The Spark Structured Streaming job (issue 4): wiring only. Not built yet."""
