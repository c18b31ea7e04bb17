"""The Kafka APIs' handlers, one module per concern; `kafka/operations.py` names them by api key.
Each takes the connection's `Context` and the decoded request and gives a plain response tree
(`kafka/shapes.py` fits it to the request's version)."""
