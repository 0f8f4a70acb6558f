#!/bin/bash
NUM_GPUS=4
deepspeed --num_gpus $NUM_GPUS train.py --ep_size 4 --deepspeed --deepspeed_config ds_config.json
