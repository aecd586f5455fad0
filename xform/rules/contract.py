"""Placeholder: filled by the contract family."""
