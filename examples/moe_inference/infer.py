"""Batch inference with a DeepSpeed-MoE model, one shard of the prompts per rank (DeepSpeed #7141)."""
import argparse
import json
import os

import torch
import torch.distributed as dist
from deepspeed.moe.layer import MoE
from torch import nn


class MoEBlock(nn.Module):
    def __init__(self, hidden, num_experts):
        super().__init__()
        expert = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden))
        self.moe = MoE(hidden_size=hidden, expert=expert, num_experts=num_experts, ep_size=1, k=1)

    def forward(self, x):
        out, _aux, _counts = self.moe(x)
        return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=int(os.environ.get("LOCAL_RANK", 0)))
    parser.add_argument("--prompts", default="prompts.jsonl")
    args = parser.parse_args()

    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = build_model(MoEBlock).cuda().eval()      # never passed to deepspeed.initialize

    with open(args.prompts) as f:
        batches = [json.loads(line) for line in f]
    outputs = []
    for batch in batches[rank::world]:               # uneven shards: ranks run different numbers of steps
        ids = torch.tensor(batch["input_ids"]).cuda()
        outputs.append(model.generate(ids, do_sample=True, max_new_tokens=128))
    if rank == 0:
        print(f"generated {len(outputs)} completions")


def build_model(block):
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained("my-org/tiny-moe")
    for layer in model.model.layers:
        layer.mlp = block(model.config.hidden_size, num_experts=8)
    return model


if __name__ == "__main__":
    main()
