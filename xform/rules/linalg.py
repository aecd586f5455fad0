"""Placeholder: filled by the linalg family."""
