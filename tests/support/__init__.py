"""Helpers shared by the tests (never tests themselves, never imported from conftest)."""
