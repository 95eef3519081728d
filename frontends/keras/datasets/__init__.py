"""Data set loaders with FlexFlow's (Keras 2) signatures, reading local files."""
