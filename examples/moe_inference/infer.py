"""Batch inference with a DeepSpeed-MoE model, one shard of the prompts per rank (DeepSpeed #7141)."""
import argparse
import json
import os

import torch
import torch.distributed as dist
from deepspeed.moe.layer import MoE
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import CausalLMOutput


class MoEBlock(nn.Module):
    def __init__(self, hidden, num_experts):
        super().__init__()
        expert = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden))
        self.moe = MoE(hidden_size=hidden, expert=expert, num_experts=num_experts, ep_size=1, k=1)

    def forward(self, x):
        out, _aux, _counts = self.moe(x)
        return out


class GraphMoELM(PreTrainedModel):
    """A causal LM whose MLPs were swapped for DeepSpeed MoE blocks during training."""

    def __init__(self, config):
        super().__init__(config)
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        self.blocks = nn.ModuleList(MoEBlock(config.hidden_size, config.num_experts)
                                    for _ in range(config.num_hidden_layers))
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def forward(self, input_ids, **kwargs):
        h = self.embed(input_ids)
        for block in self.blocks:
            h = h + block(h)
        return CausalLMOutput(logits=self.lm_head(h))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=int(os.environ.get("LOCAL_RANK", 0)))
    parser.add_argument("--prompts", default="prompts.jsonl")
    parser.add_argument("--checkpoint", default="checkpoints/graph-moe")
    args = parser.parse_args()

    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = GraphMoELM.from_pretrained(args.checkpoint).cuda().eval()   # never passed to deepspeed.initialize

    with open(args.prompts) as f:
        batches = [json.loads(line) for line in f]
    outputs = []
    for batch in batches[rank::world]:               # uneven shards: ranks run different numbers of steps
        ids = torch.tensor(batch["input_ids"]).cuda()
        outputs.append(model.generate(ids, do_sample=True, max_new_tokens=128))
    if rank == 0:
        print(f"generated {len(outputs)} completions")


if __name__ == "__main__":
    main()
