"""FlexFlow-style example scripts for the low-level `flexflow.core` API (run them as scripts)."""
