"""The signature data and its compiled forms (Python and grep -E)."""

import re
import shutil
import subprocess

import pytest

from gpuops.onbox.triage import matcher, signatures as S

SEED_ORDER = (  # the procedure's tables, in their priority order
    "container-pull-fail", "container-load-fail", "no-gpu", "nccl-nic-fail", "port-fail", "model-not-found",
    "patch-branch-fail", "ray-start-fail", "preflight-timeout", "pull-timeout", "ecc-timeout", "train-timeout",
    "hang", "heartbeat-timeout", "oom-host", "oom-gpu", "nccl-timeout", "xla-compile-fail", "python-exception",
    "signal-kill", "subprocess-fail", "actor-fail", "cancelled", "node-fail", "unknown-death", "stage-fail")


def test_seed_classes_keep_their_names_and_order():
    seed = [c for c in S.CLASS_NAMES if S.CLASS_BY_NAME[c].table != "extension"]
    assert tuple(seed) == SEED_ORDER


def test_every_class_has_a_way_to_be_found_and_next_steps():
    targets = {s.target for s in S.SIGNATURES} | set(S.TIMEOUT_CLASS_BY_STAGE.values()) | {"stage-fail"}
    targets |= {cls for _, cls in S.CANCEL_REASONS}  # Slurm's reason on a CANCELLED line
    for c in S.CLASSES:
        assert c.steps and c.what
        assert c.role == "derived" or c.name in targets, c.name


def test_signature_ids_are_unique_and_patterns_start_with_a_literal():
    ids = [s.id for s in S.SIGNATURES]
    assert len(ids) == len(set(ids))
    for s in S.SIGNATURES:
        matcher._first_atom(s.pattern)


def test_every_top_level_branch_starts_with_a_literal():
    # What keeps `re` fast: without a first-character set the search tries every branch at
    # every position (measured ~50x slower on a 50 MB log).
    from re import _compiler, _parser  # noqa: the same analysis re.compile does

    parsed = _parser.parse(matcher.LINE_RX.pattern)
    assert _compiler._get_charset_prefix(parsed, 0)
    for rx in matcher.CHUNK_RXS:  # and each whole-chunk pass has a literal first character
        assert _compiler._get_literal_prefix(_parser.parse(rx.pattern), 0)[0]


@pytest.mark.parametrize("text, sig", [
    (b"Killed process 4242 (python)", "oom_killed_process"),
    (b"NCCL WARN MSCCL++: Feature not enabled", "h_mscclpp"),
    (b"NCCL WARN Timeout waiting for peer", "nccl_warn_timeout"),
    (b"NCCL WARN NET/IB : port error", "nccl_warn"),
])
def test_longer_literal_branch_wins_at_the_same_start(text, sig):
    assert matcher.LINE_RX.match(text).lastgroup == sig


@pytest.mark.parametrize("body, ere", [
    ("A-Z", "[A-Z]"), ("A-Za-z0-9 ._/-", "[A-Za-z0-9 ._/-]"), ("^\\r\\n", "."), ("0-9.", "[0-9.]"),
    ("\\w.", "[[:alnum:]_.]"), ("\\]x\\-", "[]x-]"),
])
def test_bracket_expressions_translate_to_posix(body, ere):
    assert matcher._class_to_ere(body) == ere


def test_ere_refuses_lookarounds():
    with pytest.raises(ValueError):
        matcher.to_ere("ab(?<=b)c")


SAMPLES = {
    "pull_login": b"[ERROR] Login to registry.example.org failed: 401",
    "port_coord": b"FATAL: Could not find a free port for Ray (tried 6379-6479)",
    "banner": b"== Docker pull TIMEOUT after 1200s",
    "torch_exitcode": b"  exitcode  : -9 (pid: 5003)",
    "torch_signal": b"traceback : Signal 9 (SIGKILL) received by PID 5003",
    "srun_exit": b"srun: error: gpu-a02: task 1: Exited with exit code 137",
    "tunnel": b"ssh -N -L 9190:head-01:9190 me@login",
    "status": b"Status: FAILED (exit 1)",
    "oom_killed_process": b"Out of memory: Killed process 4242 (python3)",
    "torch_got_signal": b"SignalException: Process 4000 got signal: 15",
    "torch_failed_exitcode": b"failed (exitcode: 1) local_rank: 0 (pid: 4242)",
    "prometheus": b"[Prometheus] Started on port 9191",
    "config": b"Config param checkpoint_period: 200",
    "ray": b"RAY=1",
    "restore_step": b"restoring from this run's directory step 200",
    "slurm_id": b"SLURM_JOB_ID=7877",
    "hub_pool": b"requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): "
                b"Max retries exceeded with url: /meta-llama/Llama-2-7b-hf/resolve/main/config.json",
    "cuda_cublas": b"RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( handle, "
                   b"opa, opb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc)`",
    "cuda_cudnn_status": b"RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR",
    "nan_loss": b"{'loss': nan, 'grad_norm': nan, 'learning_rate': 1.9e-05, 'epoch': 0.42}",
    "nan_loss_cap": b"Loss: nan",
    "nan_grad_norm": b" iteration 1200/ 5000 | grad norm: nan | number of skipped iterations: 1",
    "pl_stopped": b"`Trainer.fit` stopped: `max_epochs=3` reached.",
    "keras_epoch": b"Epoch 5/5",
    "wandb_synced": b"wandb: Synced 5 W&B file(s), 0 media file(s), 2 artifact file(s) and 0 other file(s)",
    "fw_torch": b"  File \"/usr/local/lib/python3.10/dist-packages/torch/nn/modules/module.py\", line 1518",
    "fw_jax": b"jax.errors.JaxRuntimeError: INTERNAL: an unexpected error",
    "aborted_core": b"run.sh: line 7:  5120 Aborted                 (core dumped) python train.py",
    "accelerate_exit": b"subprocess.CalledProcessError: Command '['/usr/bin/python3', 'train.py']' returned non-zero "
                       b"exit status 1.",
    # the framework tables (gpuops/onbox/triage/frameworks.py), as each framework prints them
    "subprocess_signal": b"subprocess.CalledProcessError: Command '['/usr/bin/python3', 'train.py']' died with "
                         b"<Signals.SIGKILL: 9>.",
    "ds_sigterm": b"[2025-03-02 10:00:00,000] [INFO] [launch.py:319:sigkill_handler] Main process received SIGTERM, exiting",
    "pl_early_stop": b"Monitored metric val_loss did not improve in the last 3 records. Best score: 0.412. Signaling "
                     b"Trainer to stop.",
    "fw_transformers": b"  File \"/usr/local/lib/python3.10/dist-packages/transformers/trainer.py\", line 1859",
    "mg_exit": b"[exiting program at iteration 500] datetime: 2025-03-02 10:00:00.000000",
    "fw_nemo": b"[NeMo I 2025-03-02 10:00:00 exp_manager:655] Experiments will be logged at /results",
    "fw_keras": b"  File \"/usr/local/lib/python3.11/site-packages/keras/src/trainers/trainer.py\", line 322",
    "keras_early_stop": b"Epoch 7: early stopping",
    "fw_flax": b"  File \"/usr/local/lib/python3.11/site-packages/flax/training/checkpoints.py\", line 88",
    "fs_done": b"2025-03-02 10:00:00 | INFO | fairseq_cli.train | done training in 3601.2 seconds",
    "max_epochs": b"train_cfg = dict(max_epochs=12, type='EpochBasedTrainLoop', val_interval=1)",
    "final_save": b"03/02 10:00:00 - mmengine - INFO - Saving checkpoint at 12 epochs",
    "yolo_done": b"100 epochs completed in 1.234 hours.",
    "fw_vllm": b"INFO 03-02 10:00:00 [api_server.py:1090] vLLM API server version 0.8.5",
    "fs_train_inner": b"2025-03-02 10:00:10 | INFO | train_inner | epoch 001:    100 / 1102 loss=9.123, num_updates=100",
    "mm_train": b"03/02 10:00:20 - mmengine - INFO - Epoch(train)  [1][ 50/7330]  lr: 2.0000e-02  eta: 0:05:00",
    "yolo_epoch": b"      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size",
    "ms_train": b"2025-03-02 10:00:00,000 - modelscope - INFO - epoch [1][100/500]\tlr: 1.000e-04, eta: 0:10:00",
    # issue 41's shapes, each as its library prints it (the signatures cite the source files)
    "rdzv_closed_seen": b"INFO:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node 'gpu-b07_3321_0' "
                        b"detected that rendezvous was closed",
    "ctx_synchronize": b'  File "/usr/lib/python3.10/multiprocessing/synchronize.py", line 57, in __init__',
    "ctx_torch_serialization": b'  File "/usr/local/lib/python3.10/dist-packages/torch/serialization.py", line 1025',
    "ctx_keras_saving": b'  File "/usr/local/lib/python3.11/site-packages/keras/src/saving/saving_lib.py", line 242',
    "ctx_load_call": b"    model.load_weights(args.weights)",
    "ckpt_magic": b"_pickle.UnpicklingError: Invalid magic number; corrupt file?",
    "ckpt_hf_unable": b"OSError: Unable to load weights from pytorch checkpoint file for 'out/pytorch_model.bin' at "
                      b"'out/pytorch_model.bin'. If you tried to load a PyTorch model from a TF 2.0 checkpoint, please "
                      b"set from_tf=True.",
    "ranks_nccl": b"gpu-a01:2001:2001 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
    "ranks_elastic": b"  global_world_sizes=[8, 8, 8, 8, 8, 8, 8, 8]",
    "ranks_deepspeed": b"[2025-03-02 10:00:00,000] [INFO] [launch.py:164:main] dist_world_size=8",
    "ranks_nodes": b"== Job 8213 on 2 node(s): gpu-a01,gpu-a02",
    "ranks_nproc": b"torchrun --nnodes=1 --nproc-per-node=8 train.py",
    "ranks_torchrun_omp": b"W0302 10:00:00.405000 4011 torch/distributed/run.py:793] Setting OMP_NUM_THREADS "
                          b"environment variable for each process to be 1 in default",
    "hf_train_metrics": b"***** train metrics *****",
    "hf_runtime_block": b"  train_runtime            = 0:05:00.21",
    "nccl_conn_reset": b"[rank1]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
                       b"Connection closed by peer [127.0.0.1]:41697.",
}


@pytest.mark.skipif(not shutil.which("grep"), reason="grep is not installed")
def test_grep_accepts_every_pattern_and_matches_what_python_matches():
    for sig, ere in zip(matcher.CANDIDATES, matcher.grep_patterns()):
        sample = SAMPLES.get(sig.id) or re.sub(r"\\(.)", r"\1", sig.pattern).encode()  # a plain pattern read literally
        assert re.search(sig.pattern.encode(), sample), sig.id
        out = subprocess.run(["grep", "-a", "-c", "-E", "-e", ere], input=sample + b"\n", capture_output=True,
                             env={"LC_ALL": "C"})
        assert out.returncode == 0 and out.stdout.strip() == b"1", (sig.id, ere, out.stderr)
