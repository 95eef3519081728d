"""flexflow.torch front end."""
