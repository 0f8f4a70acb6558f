"""Runtime half of dslint: ``dslint preflight`` (see docs/preflight.md).

Nothing here imports torch or deepspeed at import time; ``dslint check`` must stay free of them.
"""
