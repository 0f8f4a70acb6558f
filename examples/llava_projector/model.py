"""A LLaVA-style model with a learned image query token (DeepSpeed #4933)."""
import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM


class VisionLanguageModel(nn.Module):
    def __init__(self, config: LlamaConfig, vision_dim: int = 1024):
        super().__init__()
        self.language_model = LlamaForCausalLM(config)
        self.projector = nn.Linear(vision_dim, config.hidden_size)
        self.image_query = nn.Parameter(torch.zeros(1, 1, config.hidden_size), requires_grad=True)

    def forward(self, input_ids, attention_mask=None, labels=None, images=None):
        embeds = self.language_model.get_input_embeddings()(input_ids)
        if images is not None:                       # only batches that contain images
            feats = self.projector(images) + self.image_query
            embeds = torch.cat([feats, embeds], dim=1)
            attention_mask = None
        return self.language_model(inputs_embeds=embeds, attention_mask=attention_mask, labels=labels)
