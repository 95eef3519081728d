"""flexflow.keras front end."""
