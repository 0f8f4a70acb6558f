"""dslint: find collective-communication hazards in DeepSpeed MoE/ZeRO setups before they hang."""

__version__ = "0.1.0"
