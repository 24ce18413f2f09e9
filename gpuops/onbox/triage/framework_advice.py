"""Next steps that depend on the framework the log shows, where they differ from a class's own
(classes.py, which are torch's). A torch CUDA OOM is never told to set remat_policy, a MaxText one
never PYTORCH_CUDA_ALLOC_CONF, a vLLM server never gradient checkpointing.

Each option named here is the framework's own spelling; the comment above each entry names the
file that defines it. Lookup (advice.steps_of): the most specific framework the log shows
(frameworks.SPECIFICITY), then its family (jax, keras), then the class's own steps.
"""

from .classes import ENDED

ADVICE = {
    # -- JAX / MaxText: the triage procedure's own rows (seed 002), and JAX's allocator settings
    # jax-ml/jax docs/gpu_memory_allocation.rst (XLA_PYTHON_CLIENT_PREALLOCATE, XLA_PYTHON_CLIENT_MEM_FRACTION);
    # google/maxtext MaxText/configs/base.yml (per_device_batch_size, max_target_length, remat_policy)
    ("oom-gpu", "jax"): (
        "Lower per_device_batch_size or max_target_length.",
        "Use remat_policy=full (or activation checkpointing).",
        "Read the XLA buffer assignment (or torch.cuda.memory_summary()) to see what holds the memory.",
        "If another process shares the GPU, JAX's preallocation of 90% is the cause: "
        "XLA_PYTHON_CLIENT_MEM_FRACTION=.XX or XLA_PYTHON_CLIENT_PREALLOCATE=false.",
    ),
    # google/maxtext MaxText/configs/base.yml (per_device_batch_size, remat_policy)
    ("oom-host", "jax"): (
        "Lower per_device_batch_size (or the data-loader worker count).",
        "Use remat_policy=full to trade compute for memory.",
        "Look for a memory spike while checkpointing (data-parallel replica 0 gathers the state).",
        ENDED + "Confirm on the node: dmesg -T | grep -i -e oom -e 'killed process', or the cgroup memory.events "
                "oom_kill counter.",
    ),
    # -- Keras / TensorFlow
    # keras-team/keras keras/src/trainers/trainer.py (fit(batch_size=...)),
    # keras-team/keras keras/src/dtype_policies/dtype_policy.py ("mixed_float16", "mixed_bfloat16")
    ("oom-gpu", "keras"): (
        "Lower batch_size in model.fit() (or the tf.data pipeline's batch()).",
        "Train in mixed precision: keras.mixed_precision.set_global_policy(\"mixed_bfloat16\") (or "
        "\"mixed_float16\" on GPUs without bf16).",
        "TensorFlow takes all GPU memory up front: tf.config.experimental.set_memory_growth(gpu, True) when "
        "another process shares the GPU.",
    ),
    # -- DeepSpeed
    # microsoft/DeepSpeed deepspeed/runtime/constants.py (train_micro_batch_size_per_gpu),
    # microsoft/DeepSpeed deepspeed/runtime/zero/config.py (stage, offload_optimizer, offload_param)
    ("oom-gpu", "deepspeed"): (
        "Lower train_micro_batch_size_per_gpu in the DeepSpeed config and raise gradient_accumulation_steps to "
        "keep the effective batch.",
        "Shard more with ZeRO: zero_optimization.stage 2 or 3; past that, offload_optimizer / offload_param "
        "with device \"cpu\".",
        "Turn on activation checkpointing (deepspeed.checkpointing, or the model's gradient_checkpointing_enable()).",
    ),
    # microsoft/DeepSpeed deepspeed/runtime/fp16/loss_scaler.py (min_loss_scale, dynamic loss scale)
    ("nan-divergence", "deepspeed"): (
        "fp16 overflowed at every loss scale down to the minimum: train in bf16 (\"bf16\": {\"enabled\": true}) "
        "where the GPU supports it.",
        "Otherwise lower the learning rate or raise the warm-up, and clip gradients (gradient_clipping).",
    ),
    # -- HF Transformers Trainer
    # huggingface/transformers src/transformers/training_args.py (per_device_train_batch_size,
    # gradient_accumulation_steps, gradient_checkpointing, auto_find_batch_size, bf16)
    ("oom-gpu", "hf"): (
        "Lower per_device_train_batch_size and raise gradient_accumulation_steps to keep the effective batch "
        "(auto_find_batch_size=True finds the largest that fits).",
        "Set gradient_checkpointing=True and bf16=True in the TrainingArguments.",
        "Reduce fragmentation: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; shorten max_seq_length / the "
        "tokenizer's max_length if it still does not fit.",
    ),
    # -- Accelerate
    # huggingface/accelerate src/accelerate/utils/memory.py (find_executable_batch_size),
    # huggingface/accelerate src/accelerate/accelerator.py (gradient_accumulation_steps, mixed_precision)
    ("oom-gpu", "accelerate"): (
        "Lower the per-GPU batch size; accelerate.utils.find_executable_batch_size retries with half the batch "
        "after an OOM.",
        "Keep the effective batch with Accelerator(gradient_accumulation_steps=N) and train with "
        "mixed_precision=\"bf16\".",
        "Turn on activation checkpointing (model.gradient_checkpointing_enable() for HF models).",
    ),
    # -- PyTorch Lightning
    # Lightning-AI/pytorch-lightning src/lightning/pytorch/trainer/trainer.py (accumulate_grad_batches, precision),
    # Lightning-AI/pytorch-lightning src/lightning/pytorch/trainer/connectors/accelerator_connector.py ("bf16-mixed")
    ("oom-gpu", "lightning"): (
        "Lower the DataLoader's batch_size and keep the effective batch with Trainer(accumulate_grad_batches=N).",
        "Train with Trainer(precision=\"bf16-mixed\"); shard the model with strategy=\"fsdp\" (or "
        "\"deepspeed_stage_2\") when it does not fit one GPU.",
        "Turn on activation checkpointing in the LightningModule (torch.utils.checkpoint around the big blocks).",
    ),
    # -- Megatron-LM
    # NVIDIA/Megatron-LM megatron/training/arguments.py (--micro-batch-size, --recompute-activations,
    # --recompute-granularity, --use-distributed-optimizer)
    ("oom-gpu", "megatron"): (
        "Lower --micro-batch-size (the global batch is kept by more accumulation steps).",
        "Recompute activations: --recompute-activations (selective), or --recompute-granularity full.",
        "Shard the optimizer state with --use-distributed-optimizer, or raise --tensor-model-parallel-size / "
        "--pipeline-model-parallel-size.",
    ),
    # -- NeMo
    # NVIDIA/NeMo examples/nlp/language_modeling/conf/megatron_gpt_config.yaml (model.micro_batch_size,
    # model.activations_checkpoint_granularity)
    ("oom-gpu", "nemo"): (
        "Lower model.micro_batch_size (model.global_batch_size stays; NeMo accumulates the rest).",
        "Recompute activations: model.activations_checkpoint_granularity=selective (or full).",
        "Raise model.tensor_model_parallel_size / pipeline_model_parallel_size to spread the model.",
    ),
    # -- fairseq
    # facebookresearch/fairseq fairseq/dataclass/configs.py (max_tokens, update_freq, memory_efficient_fp16)
    ("oom-gpu", "fairseq"): (
        "Lower --max-tokens (or --batch-size) and raise --update-freq to keep the effective batch.",
        "Use --memory-efficient-fp16 (or --memory-efficient-bf16), and --checkpoint-activations where the model "
        "supports it.",
    ),
    # facebookresearch/fairseq fairseq/optim/dynamic_loss_scaler.py ("Minimum loss scale reached")
    ("nan-divergence", "fairseq"): (
        "The loss kept overflowing down to the minimum loss scale: lower --lr, clip gradients with --clip-norm, "
        "or raise the batch size, as fairseq's own message says.",
        "Train in bf16 (--bf16) where the GPU supports it.",
    ),
    # -- mmdetection / mmengine
    # open-mmlab/mmengine mmengine/optim/optimizer/amp_optimizer_wrapper.py (AmpOptimWrapper)
    ("oom-gpu", "mmengine"): (
        "Lower train_dataloader.batch_size in the config (and scale the learning rate with auto_scale_lr).",
        "Train in mixed precision: optim_wrapper = dict(type='AmpOptimWrapper', ...) (tools/train.py --amp).",
        "Use a smaller input scale in the train pipeline (Resize scale) for detection models.",
    ),
    # -- Ultralytics YOLO
    # ultralytics/ultralytics ultralytics/cfg/default.yaml (batch, imgsz, cache)
    ("oom-gpu", "ultralytics"): (
        "Lower batch= (batch=-1 lets AutoBatch pick one for about 60% of the GPU memory).",
        "Lower imgsz= and leave cache=False (cache=ram/disk moves images off the GPU path only).",
    ),
    # -- vLLM
    # vllm-project/vllm vllm/engine/arg_utils.py (gpu_memory_utilization, max_model_len, max_num_seqs,
    # enforce_eager, tensor_parallel_size)
    ("oom-gpu", "vllm"): (
        "Lower --max-model-len (the KV cache for one full-length request must fit), or raise "
        "--gpu-memory-utilization if nothing else uses the GPU.",
        "Lower --max-num-seqs, and --enforce-eager saves the CUDA graphs' memory.",
        "Spread the model with --tensor-parallel-size, or use a quantized checkpoint.",
    ),
    # -- ColossalAI
    # hpcaitech/ColossalAI colossalai/booster/plugin/low_level_zero_plugin.py (stage, cpu_offload),
    # hpcaitech/ColossalAI colossalai/booster/plugin/gemini_plugin.py (placement_policy)
    ("oom-gpu", "colossalai"): (
        "Lower the per-GPU batch size and keep the effective batch with gradient accumulation.",
        "Shard more: LowLevelZeroPlugin(stage=2, cpu_offload=True), or GeminiPlugin(placement_policy=\"auto\").",
        "Turn on gradient checkpointing (model.gradient_checkpointing_enable()).",
    ),
    # -- ModelScope
    # modelscope/modelscope modelscope/trainers/trainer.py (train.dataloader.batch_size_per_gpu)
    ("oom-gpu", "modelscope"): (
        "Lower train.dataloader.batch_size_per_gpu in the configuration (cfg_modify_fn).",
        "Turn on fp16 / gradient checkpointing where the model supports it.",
    ),
    # -- submitit: the host memory is what the Slurm job asked for
    # facebookincubator/submitit submitit/slurm/slurm.py (mem_gb -> --mem)
    ("oom-host", "submitit"): (
        "Ask Slurm for more memory: executor.update_parameters(mem_gb=...) (it becomes sbatch --mem).",
        "Lower the DataLoader's num_workers: every worker holds its own copy of what the dataset keeps in RAM.",
        ENDED + "Confirm with sacct -j ID --format=State,MaxRSS,ReqMem: OUT_OF_MEMORY with MaxRSS near ReqMem.",
    ),
}
