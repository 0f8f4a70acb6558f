import deepspeed
from transformers import LlamaConfig

from model import VisionLanguageModel


def main(args, loader):
    model = VisionLanguageModel(LlamaConfig(hidden_size=256, num_hidden_layers=2, num_attention_heads=4))
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                           config="ds_zero2.json")
    for batch in loader:          # mixed text-only and image-text batches
        loss = engine(**batch).loss
        engine.backward(loss)
        engine.step()
