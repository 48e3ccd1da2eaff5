"""Reranking: the pair scorers, the HTTP reranker client, cross-encoder training, the ONNX int8 path and the rerank stage."""
