"""Placeholder: filled by the index family."""
