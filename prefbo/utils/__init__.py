r"""Numerical and testing utilities shared across prefbo."""
