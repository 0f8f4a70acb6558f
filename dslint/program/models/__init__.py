"""The models a run trains or serves: `nn.Module` classes with the parameters and submodules they create
(modules), the paths of their `forward` (forward_paths), DeepSpeed and library MoE layers (moe, moe_library,
moe_usage), and the optimizers and param groups built over them (optimizers, param_groups)."""
