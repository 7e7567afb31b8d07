"""Helpers only the tests use (never tests themselves; no test imports another test module).

What the benchmarks use too lives in devkit/ (the template through AWS's SAM translator, the
events, Lambda's context object, SnapStart emulated); the helpers here build on it.
"""
