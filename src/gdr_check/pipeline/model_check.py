"""The library entry point: from a target (path or repo id) and a deployment to per-rank shapes and diagnostics.

source -> model description -> engine settings -> expected call and pools per rank -> model rules (GDR1xx)
-> contract (GDR2xx). Unreadable input raises `gdr_check.sources.SourceError`; everything found in a readable
checkpoint is a diagnostic in `ModelCheck.report`. No torch, triton or numpy on this path.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from ..base.errors import display_path
from ..base.identity import REPORT_SCHEMA_VERSION
from ..base.records import dataclass
from ..base.report import Diagnostic, Report
from ..base.tensor_spec import TensorSpec
from ..call.expected import RankHeads, StateMemory, engine_pools, expected_call, per_rank_heads, state_memory
from ..call.packed_call import PackedDecodeCall
from ..call.pools import PoolPlan, plan_pool
from ..checks import rules_model  # registers the GDR1xx rules
from ..checks.contract import run_contract
from ..deployment.decode_path import DecodePath, decode_path
from ..deployment.settings import Deployment, EngineSettings, resolve
from ..models.adapters import linear_markers, select_adapter
from ..models.builtin import BuiltinModel, closest_builtin, get_builtin
from ..models.description import LinearAttentionModel, Locator, describe
from ..sources import Checkpoint, SourceError, open_checkpoint
from ..sources.rules import ModelNotFound


@dataclass
class ModelCheck:
    checkpoint: Checkpoint  # kind "builtin" for a built-in description
    deployment: Deployment
    model: LinearAttentionModel | None = None
    settings: EngineSettings | None = None
    heads: RankHeads | None = None
    call: PackedDecodeCall | None = None  # one linear-attention layer on one rank
    pools: dict[str, TensorSpec] = field(default_factory=dict)
    memory: StateMemory | None = None
    report: Report = field(default_factory=Report)
    builtin: BuiltinModel | None = None
    contract_run: bool = False
    decode: DecodePath | None = None  # the decode kernel the deployment's engine calls
    pool: PoolPlan | None = None  # slots and bytes per request under the strategy and draft tokens (sglang)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.report.ok

    @property
    def num_slots(self) -> int:
        """The pool rows checked: the engine's for the model (`EngineSettings.num_slots`); with no model described,
        the deployment's `--slots`, else one slot per request and row 0."""
        if self.settings is not None:
            return self.settings.num_slots
        return self.deployment.slots or self.deployment.batch + 1

    def shapes(self) -> dict[str, list[int]]:
        """One list of ints per tensor argument of the kernel call, for one rank."""
        if self.call is None:
            return {}
        return {name: list(spec.shape) for name, spec in self.call.tensors().items()}

    def source_dict(self) -> dict[str, Any]:
        checkpoint = self.checkpoint
        root = getattr(checkpoint, "root", None)
        return {
            "target": getattr(checkpoint, "target", None),
            "kind": getattr(checkpoint, "kind", None),
            # Shown like every other path (relative to the working directory when below it), so that the JSON
            # document does not depend on where the checkout lives.
            "root": display_path(root) if root is not None else None,
            "config_file": getattr(checkpoint, "config_file", None),
            "index_file": getattr(checkpoint, "index_file", None),
            "files_read": list(getattr(checkpoint, "files_read", []) or []),
            "bytes_read": getattr(checkpoint, "bytes_read", 0),
            "tensors": len(getattr(checkpoint, "tensors", {}) or {}),
            "weights_checked": bool(self.model and self.model.weights_checked),
            "builtin": None if self.builtin is None else {
                "repo_id": self.builtin.repo_id, "confidence": self.builtin.confidence,
                "unverified": list(self.builtin.unverified),
            },
            "notes": list(getattr(checkpoint, "notes", []) or []) + self.notes,
        }

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON document (issue 3 item 7). Fields are only ever added."""
        deployment = self.deployment
        settings = self.settings
        return {
            "schema_version": REPORT_SCHEMA_VERSION,
            "source": self.source_dict(),
            "model": self.model.to_dict() if self.model is not None else None,
            "deployment": {
                "tp": deployment.tp,
                "batch": deployment.batch,
                "num_slots": self.num_slots,
                "state_dtype": settings.state_dtype if settings else deployment.state_dtype,
                "conv_dtype": settings.conv_dtype if settings else None,
                "engine": deployment.engine,
                "engine_profile": deployment.profile.spec,  # what `engine` selected, e.g. vllm -> vllm@0.33
                "engine_profile_reason": deployment.engine_reason,  # flag, config, installed or default
                "sm": deployment.sm,
                "gpu_memory": deployment.gpu_memory,
                "mamba_strategy": deployment.mamba_strategy,
                "speculative_tokens": deployment.speculative_tokens,
            },
            "shapes": self.shapes(),
            "call": self.call.to_dict() if self.call is not None else None,
            "pools": {name: spec.to_dict() for name, spec in self.pools.items()},
            "memory": self.memory.to_dict() if self.memory is not None else None,
            "decode_path": self.decode.to_dict() if self.decode is not None else None,
            "pool_plan": self.pool.to_dict() if self.pool is not None else None,
            "diagnostics": [diagnostic.to_dict() for diagnostic in self.report],
        }


def builtin_checkpoint(model: BuiltinModel, note: str | None = None) -> Checkpoint:
    """A `Checkpoint` holding a built-in model's config and no tensors."""
    notes = [note] if note else []
    if model.confidence != "V":
        notes.append(f"built-in values for {model.repo_id} include unverified fields ({model.confidence}): "
                     + ", ".join(model.unverified))
    notes.extend(model.notes)
    return Checkpoint(target=model.repo_id, root=None, kind="builtin", config=model.config_copy(), notes=notes)


def open_target(target: str, *, cache_dir: str | None = None, revision: str | None = None,
                follow_links: bool = False, metadata_cache: bool | None = None
                ) -> tuple[Checkpoint, BuiltinModel | None]:
    """The checkpoint for a path or repo id; a built-in description when a known repo id is not cached (and
    no revision was asked for: a revision means its files). `metadata_cache`: as `open_checkpoint` takes it."""
    try:
        return open_checkpoint(target, cache_dir=cache_dir, revision=revision, follow_links=follow_links,
                               metadata_cache=metadata_cache), None
    except SourceError as error:
        model = get_builtin(str(target)) if revision is None else None
        # a repo id a letter or two off a built-in one (a revision, `@rev` or given apart, names its files: no guess)
        if (isinstance(error, ModelNotFound) and model is None and revision is None and "@" not in str(target)
                and (close := closest_builtin(str(target)))):
            raise ModelNotFound(None, repo_id=target, cache_dir=error.values["cache_dir"],
                                fix=f"did you mean `{close.repo_id}` (a built-in model)?") from None
        if not isinstance(error, ModelNotFound) or model is None:
            raise
        note = f"not in the local cache: using the built-in description of {model.repo_id}"
        return builtin_checkpoint(model, note), model


def check_model(target: str, deployment: Deployment, *, cache_dir: str | None = None, revision: str | None = None,
                follow_links: bool = False, metadata_cache: bool | None = None) -> ModelCheck:
    """Check one model for one deployment. Raises `SourceError` when the input cannot be read."""
    checkpoint, builtin = open_target(target, cache_dir=cache_dir, revision=revision, follow_links=follow_links,
                                      metadata_cache=metadata_cache)
    return check_checkpoint(checkpoint, deployment, builtin=builtin)


def check_builtin(repo_id: str, deployment: Deployment) -> ModelCheck:
    """Check a built-in model without looking at the cache."""
    model = get_builtin(repo_id)
    if model is None:
        raise KeyError(f"{repo_id} is not a built-in model")
    return check_checkpoint(builtin_checkpoint(model), deployment, builtin=model)


def check_checkpoint(checkpoint: Checkpoint, deployment: Deployment, *,
                     builtin: BuiltinModel | None = None) -> ModelCheck:
    """Everything after reading: description, engine settings, per-rank call and pools, all diagnostics."""
    result = ModelCheck(checkpoint=checkpoint, deployment=deployment, builtin=builtin)
    reading: list[Diagnostic] = list(getattr(checkpoint, "diagnostics", []) or [])  # notes of the reader
    selection = select_adapter(checkpoint.config, checkpoint.tensors)
    model = describe(checkpoint, selection.adapter, selection.identity) if selection.adapter is not None else None
    if model is None:
        markers = [] if selection.reason else linear_markers(checkpoint.config, selection)
        if markers:
            # A config that says it has linear attention is never "nothing to check".
            result.report = Report(rules_model.undescribed_linear_attention(checkpoint, selection, markers))
            return result
        notes = [selection.reason] if selection.reason else []
        if selection.reason is None:
            notes.append("no layer is a GDN/KDA layer by the config, and no tensor is a GDN/KDA parameter")
        # the `architectures` line of config.json, as for every diagnostic about a config key
        location = Locator(checkpoint).config("architectures").location if checkpoint.config_file else None
        violation = rules_model.NoLinearLayers(subject=selection.identity.subject)
        result.report = Report([*reading, violation.diagnostic(notes=notes, location=location)])
        return result

    result.model = model
    result.notes.extend(model.notes)  # what the description had to read specially (packed weights)
    # A config-only checkpoint already says so (the reader's note); other sources may still lack linear weights.
    if model.unplaced_tensors:  # (said whatever the rule selection: GDR116 may be ignored)
        result.notes.append("no tensor lies under the layer names this family loads: shapes come from the config "
                            "alone and nothing was cross-checked")
    elif not model.weights_checked and builtin is None and checkpoint.kind != "config-only":
        result.notes.append("no weights were read: shapes come from the config alone and nothing was cross-checked")
    settings = resolve(model, deployment)
    result.settings = settings
    if deployment.profile_note is not None:
        result.notes.append(deployment.profile_note)
    result.notes.extend(settings.notes)
    if model.complete:
        result.heads = per_rank_heads(model, deployment.tp)
    result.decode = decode_path(model, deployment.engine, speculative_tokens=deployment.speculative_tokens,
                                sm=deployment.sm, state_dtype=settings.state_dtype)
    if result.heads is not None:
        if result.decode.packed:
            result.call = expected_call(model, settings)
        result.pools = engine_pools(model, settings)
        result.memory = state_memory(model, settings)
        if deployment.profile.models_pool_strategies:
            result.pool = plan_pool(model, settings)

    ctx = rules_model.ModelContext(model=model, deployment=deployment, settings=settings,
                                   heads=result.heads, memory=result.memory)
    diagnostics: list[Diagnostic] = [*reading, *rules_model.run_model_rules(ctx)]
    blocked = any(d.code in rules_model.BLOCKING_RULES and d.severity == "error" for d in diagnostics)
    if not result.decode.packed:
        result.notes.append(f"kernel contract not run: {result.decode.text()}")
    elif result.call is not None and not blocked:
        diagnostics.extend(run_contract(result.call, deployment.engine))
        result.contract_run = True
    elif result.call is None:
        result.notes.append("no per-rank kernel call: the geometry is incomplete or TP does not split the heads")
    else:
        result.notes.append("kernel contract not run: the model-level errors above already decide the call")
    result.report = Report(diagnostics)
    return result
