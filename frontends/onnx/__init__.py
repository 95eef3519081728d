"""flexflow.onnx front end."""
