"""Python API of the pre-flight for custom training loops (torch and deepspeed are imported on use).

    from dslint.preflight import guard
    with guard(engine):
        loss = engine(batch); engine.backward(loss); engine.step()
"""

from __future__ import annotations


def guard(*args, **kwargs):
    from dslint.runtime_checks.api import guard as _guard
    return _guard(*args, **kwargs)


__all__ = ["guard"]
