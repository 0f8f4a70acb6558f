#!/bin/bash
torchrun --nproc-per-node 4 infer.py --prompts data/prompts.jsonl
