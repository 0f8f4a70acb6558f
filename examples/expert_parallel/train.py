"""Phi-3-style fine-tuning with expert parallelism (DeepSpeed #5794): every `layer.mlp` becomes an MoE."""
import argparse

import deepspeed
import torch
from deepspeed.moe.layer import MoE
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM, AutoTokenizer, DataCollatorWithPadding


def add_experts(model, num_experts, ep_size):
    for layer in model.model.layers:
        layer.mlp = MoE(hidden_size=model.config.hidden_size, expert=layer.mlp, num_experts=num_experts,
                        ep_size=ep_size, k=1, drop_tokens=True)
    return model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=-1)
    parser.add_argument("--ep_size", type=int, default=4)
    parser = deepspeed.add_config_arguments(parser)
    args = parser.parse_args()

    tokenizer = AutoTokenizer.from_pretrained("microsoft/Phi-3-mini-4k-instruct")
    model = AutoModelForCausalLM.from_pretrained("microsoft/Phi-3-mini-4k-instruct")
    model = add_experts(model, num_experts=4, ep_size=args.ep_size)

    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
    engine, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config="ds_config.json")

    collator = DataCollatorWithPadding(tokenizer, padding="longest")
    loader = DataLoader(load_dataset(tokenizer), batch_size=4, collate_fn=collator, shuffle=True)
    for batch in loader:
        batch = {k: v.to(engine.device) for k, v in batch.items()}
        loss = engine(**batch).loss
        engine.backward(loss)
        engine.step()
    engine.save_checkpoint("checkpoints")


def load_dataset(tokenizer):
    import datasets
    return datasets.load_from_disk("data/train").map(lambda ex: tokenizer(ex["text"]), batched=True)


if __name__ == "__main__":
    main()
