"""What each framework prints at the ends of a run, as data: which lines name it, which say training
completed, which say it stopped or failed, which are its healthy noise, and which announce a restart.

Every string is the framework's own: the comment above each entry names the repository and the
file that prints it (read there, not taken from pasted logs). Patterns follow the signature rules
of signatures.py (a literal first character, grep -E translatable).

Kinds (signatures.py turns them into signatures):
    detect    the log shows this framework (advice follows it: framework_advice.py)
    done      the run completed: a trainer's own end of training
    weak      a launcher's clean exit for its own workers: completed only when no failure ended the
              run (one node's launcher exits 0 beside another node's crash)
    fail      a line that says the run is going down, with the class it belongs to
    cancel    the framework's own handling of a stop signal: how it stopped, not why
    noise     printed by healthy runs although it holds a failure signature: the line is dropped
    restart   the run goes on after this line (an elastic restart): what failed before it did
              not end the run
    progress  a line a working run prints again and again that is no step line (a server's
              throughput report, an epoch's header): what failed before the last two did not end
              the run
    total     a number of epochs the run is configured for (a completion rule compares with it)
"""

from typing import NamedTuple, Optional


class Entry(NamedTuple):
    framework: str
    kind: str
    id: str
    pattern: str
    target: Optional[str] = None   # the class of a `fail` line
    rule: Optional[str] = None     # a scanner rule (signatures.py)


def _e(framework, kind, id, pattern: str, target=None, rule=None):
    return Entry(framework, kind, id, pattern, target, rule)


ENTRIES = (
    # ------------------------------------------------------------------ PyTorch (torch.distributed)
    # pytorch/pytorch torch/__init__.py, torch/cuda/__init__.py (module paths in tracebacks: torch/, torch.)
    _e("torch", "detect", "fw_torch", r"torch[./r]"),
    # pytorch/pytorch torch/distributed/elastic/agent/server/api.py ("[%s] worker group successfully finished.")
    _e("torch", "weak", "agent_done", r"worker group successfully finished"),
    # pytorch/pytorch torch/distributed/elastic/agent/server/api.py ("%s/%s attempts left; will restart worker group")
    _e("torch", "restart", "agent_restart", r"will restart worker group"),
    # pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (the watchdog's tear-down)
    _e("torch", "fail", "nccl_teardown", r"we are taking the entire process down", "nccl-timeout"),
    # pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp ("CUDA out of memory. Tried to allocate ...")
    _e("torch", "fail", "cuda_oom", r"CUDA out of memory", "oom-gpu"),
    # pytorch/pytorch torch/csrc/distributed/c10d/socket.cpp: IPv6 then IPv4 are tried; one failing is noise
    _e("torch", "noise", "h_socket_bind", r"The server socket has failed to bind to"),
    # pytorch/pytorch torch/csrc/distributed/c10d/socket.cpp: neither address could be used
    _e("torch", "fail", "socket_listen", r"The server socket has failed to listen on any local network address",
       "port-fail"),
    # gcc-mirror/gcc libstdc++-v3/libsupc++/vterminate.cc (a C++ exception nobody caught: SIGABRT)
    _e("torch", "fail", "cxx_terminate", r"terminate called after throwing an instance of", "signal-kill"),
    # python/cpython Lib/subprocess.py (CalledProcessError for a child killed by a signal)
    _e("torch", "fail", "subprocess_signal", r"died with <Signals\.SIG[A-Z0-9]+", "subprocess-fail", "signal"),

    # ------------------------------------------------------------------ DeepSpeed
    # microsoft/DeepSpeed deepspeed/launcher/launch.py, deepspeed/utils/logging.py ("[deepspeed]" prefixes)
    _e("deepspeed", "detect", "fw_deepspeed", r"deepspeed"),
    # microsoft/DeepSpeed deepspeed/launcher/launch.py ("Process {pid} exits successfully.")
    _e("deepspeed", "weak", "ds_success", r"exits successfully"),
    # microsoft/DeepSpeed deepspeed/launcher/launch.py (sigkill_handler: "Main process received SIGTERM, exiting")
    _e("deepspeed", "cancel", "ds_sigterm", r"Main process received SIG(?:TERM|INT), exiting", "cancelled"),
    # microsoft/DeepSpeed deepspeed/runtime/fp16/loss_scaler.py (fp16 overflow at the minimum loss scale)
    _e("deepspeed", "fail", "ds_min_scale", r"Current loss scale already at minimum - cannot decrease scale anymore",
       "nan-divergence"),

    # ------------------------------------------------------------------ Accelerate
    # huggingface/accelerate src/accelerate/commands/launch.py ("accelerate launch", its module path)
    _e("accelerate", "detect", "fw_accelerate", r"accelerate"),

    # ------------------------------------------------------------------ PyTorch Lightning
    # Lightning-AI/pytorch-lightning src/lightning/pytorch/trainer/setup.py (module paths: lightning/, lightning.)
    _e("lightning", "detect", "fw_lightning", r"lightning"),
    # Lightning-AI/pytorch-lightning src/lightning/pytorch/loops/fit_loop.py
    _e("lightning", "done", "pl_stopped", r"Trainer\.fit` stopped: `max_(?:epochs|steps)=\d+` reached"),
    # Lightning-AI/pytorch-lightning src/lightning/pytorch/callbacks/early_stopping.py (patience exhausted)
    _e("lightning", "done", "pl_early_stop", r"did not improve in the last \d+ records"),
    # Lightning-AI/pytorch-lightning src/lightning/pytorch/callbacks/timer.py
    _e("lightning", "done", "pl_timer", r"Time limit reached\. Elapsed time is"),
    # Lightning-AI/pytorch-lightning src/lightning/pytorch/callbacks/early_stopping.py (check_finite stops the run)
    _e("lightning", "fail", "nan_not_finite", r"is not finite\. Previous best value", "nan-divergence"),
    # Lightning-AI/pytorch-lightning src/lightning/pytorch/trainer/call.py
    _e("lightning", "cancel", "pl_interrupt", r"Detected KeyboardInterrupt, attempting graceful shutdown", "cancelled"),

    # ------------------------------------------------------------------ HF Transformers Trainer
    # huggingface/transformers src/transformers/trainer.py (module paths: transformers/)
    _e("hf", "detect", "fw_transformers", r"transformers[/.]"),
    # huggingface/transformers src/transformers/trainer.py (end of _inner_training_loop)
    _e("hf", "done", "hf_done", r"Training completed\. Do not forget to share your model"),
    # huggingface/transformers src/transformers/trainer.py (the final metrics it logs: `{'train_runtime': ...}`),
    # src/transformers/trainer_pt_utils.py (log_metrics: "***** train metrics *****", then `  train_runtime  = 0:05:00.21`)
    _e("hf", "done", "hf_runtime", r"'train_runtime': "),
    _e("hf", "done", "hf_train_metrics", r"\*\*\*\*\* train metrics \*\*\*\*\*"),
    _e("hf", "done", "hf_runtime_block", r"train_runtime +="),
    # huggingface/transformers src/transformers/tokenization_utils_base.py (a warning, the run goes on)
    _e("hf", "noise", "h_tokenizer", r"Token indices sequence length is longer than the specified maximum"),

    # ------------------------------------------------------------------ Megatron-LM
    # NVIDIA/Megatron-LM megatron/training/training.py (module paths: megatron/)
    _e("megatron", "detect", "fw_megatron", r"megatron"),
    # NVIDIA/Megatron-LM megatron/training/training.py (print_datetime('after training is done'))
    _e("megatron", "done", "mg_done", r"\[after training is done\]"),
    # NVIDIA/Megatron-LM megatron/training/training.py (--exit-interval / --exit-duration-in-mins reached)
    _e("megatron", "done", "mg_exit", r"exiting program (?:at iteration|after \d+ minutes)"),
    # NVIDIA/Megatron-LM megatron/training/training.py (--exit-signal-handler)
    _e("megatron", "cancel", "mg_sigterm", r"exiting program after receiving SIGTERM", "cancelled"),
    # NVIDIA/Megatron-LM megatron/core/distributed/param_and_grad_buffer.py
    _e("megatron", "fail", "nan_megatron", r"found NaN in local grad norm", "nan-divergence"),

    # ------------------------------------------------------------------ NeMo
    # NVIDIA/NeMo nemo/utils/formatters/base.py ("[NeMo %(levelname)1.1s %(asctime)s ...]")
    _e("nemo", "detect", "fw_nemo", r"\[NeMo [DIWEC] "),

    # ------------------------------------------------------------------ Keras / TensorFlow
    # keras-team/keras keras/src/trainers/trainer.py (tracebacks name keras/src/... paths)
    _e("keras", "detect", "fw_keras", r"keras[/.]"),
    # tensorflow/tensorflow tensorflow/core/util/port.cc (its C++ log lines name tensorflow/ paths)
    _e("keras", "detect", "fw_tensorflow", r"tensorflow/"),
    # keras-team/keras keras/src/callbacks/progbar_logger.py ("Epoch {epoch + 1}/{self.epochs}")
    _e("keras", "done", "keras_epoch", r"Epoch \d+/\d+", rule="keras_epoch"),
    # keras-team/keras keras/src/utils/progbar.py (a finished bar, in any of its three formats)
    _e("keras", "done", "keras_done", r"/step", rule="keras_done"),
    # keras-team/keras keras/src/callbacks/early_stopping.py ("Epoch {n}: early stopping")
    _e("keras", "done", "keras_early_stop", r"Epoch \d+: early stopping"),
    # keras-team/keras keras/src/callbacks/terminate_on_nan.py (stops fit() and exits 0)
    _e("keras", "fail", "keras_nan_stop", r"Invalid loss, terminating training", "nan-divergence"),
    # keras-team/keras keras/src/callbacks/terminate_on_nan.py (raise_error=True)
    _e("keras", "fail", "keras_nan_raise", r"NaN or Inf loss encountered at batch", "nan-divergence"),

    # ------------------------------------------------------------------ JAX / Flax / MaxText
    # jax-ml/jax jax/errors.py (module paths and errors: jaxlib, jax.errors, jax.distributed)
    _e("jax", "detect", "fw_jax", r"jax(?:lib|\.errors|\.distributed|/)"),
    # google/maxtext MaxText/train.py (its module path and logs)
    _e("jax", "detect", "fw_maxtext", r"MaxText"),
    # jax-ml/jax jaxlib/xla_client.py (XlaRuntimeError)
    _e("jax", "detect", "fw_xla_runtime", r"XlaRuntimeError"),
    # google/flax flax/training/checkpoints.py (tracebacks name flax/ paths)
    _e("jax", "detect", "fw_flax", r"flax[/.]"),
    # google/flax examples/gemma/train.py ("Total training loop time: ... minutes")
    _e("jax", "done", "flax_done", r"Total training loop time: "),
    # openxla/xla xla/stream_executor/integrations/tf_allocator_adapter.cc (TfAllocatorAdapter::Allocate)
    _e("jax", "fail", "xla_oom", r"Out of memory while trying to allocate", "oom-gpu"),

    # ------------------------------------------------------------------ fairseq
    # facebookresearch/fairseq fairseq_cli/train.py (module paths and logger names: fairseq)
    _e("fairseq", "detect", "fw_fairseq", r"fairseq"),
    # facebookresearch/fairseq fairseq_cli/train.py ("done training in {:.1f} seconds")
    _e("fairseq", "done", "fs_done", r"done training in \d"),
    # facebookresearch/fairseq fairseq/optim/dynamic_loss_scaler.py (FloatingPointError: the run stops)
    _e("fairseq", "fail", "fs_min_scale", r"Minimum loss scale reached", "nan-divergence"),
    # facebookresearch/fairseq fairseq/logging/progress_bar.py (SimpleProgressBar.log, logger renamed train_inner)
    _e("fairseq", "progress", "fs_train_inner", r"train_inner \| epoch \d+:"),
    # facebookresearch/fairseq fairseq/trainer.py (_log_oom: fairseq recovers unless it re-raises)
    _e("fairseq", "noise", "h_fs_oom", r"OOM: Ran out of memory with exception"),

    # ------------------------------------------------------------------ mmdetection / mmengine
    # open-mmlab/mmengine mmengine/runner/runner.py (module paths: mmengine, mmdet)
    _e("mmengine", "detect", "fw_mmengine", r"mmengine"),
    # open-mmlab/mmdetection mmdet/apis/inference.py (tracebacks name mmdet/ paths)
    _e("mmengine", "detect", "fw_mmdet", r"mmdet"),
    # open-mmlab/mmengine mmengine/runner/log_processor.py ("Epoch(train) [E][i/N]", "Iter(train) [i/N]")
    _e("mmengine", "progress", "mm_train", r"\(train\) +\["),
    # open-mmlab/mmengine mmengine/runner/runner.py (logs f'Config:\n{self.cfg.pretty_text}': max_epochs=N)
    _e("mmengine", "total", "max_epochs", r"max_epochs=\d+"),
    # open-mmlab/mmengine mmengine/hooks/checkpoint_hook.py ("Saving checkpoint at {runner.epoch + 1} epochs"):
    # the run is done when that is the config's max_epochs
    _e("mmengine", "done", "final_save", r"Saving checkpoint at \d+ epochs", rule="final_save"),

    # ------------------------------------------------------------------ Ultralytics YOLO
    # ultralytics/ultralytics ultralytics/engine/trainer.py (banner and module paths)
    _e("ultralytics", "detect", "fw_ultralytics", r"ltralytics"),
    # ultralytics/ultralytics ultralytics/models/yolo/detect/train.py (progress_string: each epoch's header)
    _e("ultralytics", "progress", "yolo_epoch", r"Epoch +GPU_mem"),
    # ultralytics/ultralytics ultralytics/engine/trainer.py ("{n} epochs completed in {h:.3f} hours.")
    _e("ultralytics", "done", "yolo_done", r"epochs completed in \d"),
    # ultralytics/ultralytics ultralytics/utils/torch_utils.py (EarlyStopping)
    _e("ultralytics", "done", "yolo_early_stop", r"Stopping training early as no improvement observed"),
    # ultralytics/ultralytics ultralytics/engine/trainer.py (first-epoch OOM: halves the batch and retries)
    _e("ultralytics", "noise", "h_yolo_oom_retry", r"Reducing to batch="),
    # ultralytics/ultralytics ultralytics/engine/trainer.py (_handle_nan_recovery gives up)
    _e("ultralytics", "fail", "yolo_nan", r"Training failed: NaN persisted for", "nan-divergence"),

    # ------------------------------------------------------------------ vLLM
    # vllm-project/vllm vllm/entrypoints/openai/api_server.py ("vLLM API server version ..."; vllm/ paths)
    _e("vllm", "detect", "fw_vllm", r"v(?:llm|LLM)"),
    # vllm-project/vllm vllm/entrypoints/llm.py (tqdm desc "Processed prompts" reaching 100%)
    _e("vllm", "done", "vllm_done", r"Processed prompts: 100%"),
    # vllm-project/vllm vllm/v1/metrics/loggers.py (the engine's periodic stats while it serves)
    _e("vllm", "progress", "vllm_stats", r"Avg prompt throughput: "),
    # vllm-project/vllm vllm/v1/core/kv_cache_utils.py (no room for the KV cache)
    _e("vllm", "fail", "vllm_kv_none", r"No available memory for the cache blocks", "oom-gpu"),
    # vllm-project/vllm vllm/v1/core/kv_cache_utils.py (max_model_len does not fit)
    _e("vllm", "fail", "vllm_kv_short", r"larger than the available KV cache memory", "oom-gpu"),
    # vllm-project/vllm vllm/v1/engine/utils.py ("See root cause above.")
    _e("vllm", "fail", "vllm_core_init", r"Engine core initialization failed", "python-exception"),

    # ------------------------------------------------------------------ ColossalAI
    # hpcaitech/ColossalAI colossalai/logging/logger.py ("colossalai - %(name)s - %(levelname)s: ...")
    _e("colossalai", "detect", "fw_colossalai", r"colossalai"),
    # hpcaitech/ColossalAI applications/ColossalChat/examples/training_scripts/train_sft.py
    _e("colossalai", "done", "clai_done", r"Saved final model checkpoint at epoch"),

    # ------------------------------------------------------------------ submitit
    # facebookincubator/submitit submitit/core/logger.py ("%(name)s %(levelname)s (%(asctime)s) - ...")
    _e("submitit", "detect", "fw_submitit", r"submitit"),
    # facebookincubator/submitit submitit/core/submission.py
    _e("submitit", "done", "sub_done", r"Job completed successfully"),
    # facebookincubator/submitit submitit/core/submission.py
    _e("submitit", "fail", "sub_exception", r"Submitted job triggered an exception", "python-exception"),
    # facebookincubator/submitit submitit/core/job_environment.py ("... this job is preempted." / "timed-out.")
    _e("submitit", "cancel", "sub_preempted", r"this job is preempted", "preempted"),
    # facebookincubator/submitit submitit/core/job_environment.py (the same line, for a time limit)
    _e("submitit", "cancel", "sub_timed_out", r"this job is timed-out", "timeout"),

    # ------------------------------------------------------------------ ModelScope
    # modelscope/modelscope modelscope/utils/logger.py ("%(asctime)s - %(name)s - ...", logger "modelscope")
    _e("modelscope", "detect", "fw_modelscope", r"modelscope"),
    # modelscope/modelscope modelscope/trainers/hooks/logger/text_logger_hook.py ("epoch [E][i/N]\t...")
    _e("modelscope", "progress", "ms_train", r"epoch \[\d+\]\[\d+/\d+\]"),
    # modelscope/modelscope modelscope/trainers/hooks/checkpoint/checkpoint_hook.py (after_run)
    _e("modelscope", "done", "ms_done", r"Train finished\. Uploading models"),
)

# The framework a log shows, most specific first (a NeMo log shows Lightning and torch as well).
SPECIFICITY = ("nemo", "megatron", "lightning", "deepspeed", "colossalai", "accelerate", "hf", "fairseq",
               "mmengine", "ultralytics", "vllm", "modelscope", "submitit", "keras", "jax", "torch")
# Each framework's family: its advice falls back to the family's, then to torch's.
FAMILY = {"jax": "jax", "keras": "keras"}

FRAMEWORK_OF = {e.id: e.framework for e in ENTRIES if e.kind == "detect"}


def family(name):
    return FAMILY.get(name, "torch")


def shown(counts, jax_steps=False):
    """The framework a log shows, from {framework: lines that named it}: the family with the most
    lines (ties go to torch, the default; MaxText's own step lines settle it for JAX), then the
    most specific framework of that family. None when nothing named one."""
    if not counts and not jax_steps:
        return None
    lines = {}
    for name, n in counts.items():
        lines[family(name)] = lines.get(family(name), 0) + n
    won = "jax" if jax_steps else max(lines, key=lambda k: (lines[k], k == "torch"))
    return next((n for n in SPECIFICITY if n in counts and family(n) == won), won)
