"""Model importers: a PyTorch module or an ONNX file becomes a graph module (`compiler.graph.Module`)
of catalog operators, with the weights as named constants."""
