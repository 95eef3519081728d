"""Operator library: the dataflow graph IR and one module per operator family."""
