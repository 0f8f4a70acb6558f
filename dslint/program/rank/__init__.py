"""Rank-varying values and the hazards they make: which expressions differ between ranks (values, taint across
functions), the walk that tracks them through a function's control flow (flow), and the collective sites that
control reaches on some ranks only (hazards, exceptions)."""
