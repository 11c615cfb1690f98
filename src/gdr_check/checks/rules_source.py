"""GDR0xx: the rules raised while reading a checkpoint's metadata (config.json, index, safetensors headers).

Each rule here is reported by `gdr_check.sources` as a `SourceError` whose message is this rule's template, so
the text in docs, SARIF and the one-line error never drift apart. Every one of them means the input could not
be read, so the run ends with exit 2, except GDR013 (an info note: the check goes on with what is there).

Numbering, stable once released:
    GDR001-GDR013  locating the input (paths, pickle files, the Hugging Face cache, links, Git LFS pointers)
    GDR020-GDR021  config.json
    GDR030-GDR038  safetensors headers
    GDR040-GDR045  the sharded-checkpoint index and its shards
"""

from __future__ import annotations

from .registry import declare

_SOURCE = "source"

# -- locating the input -----------------------------------------------------------------------------------

declare(
    "GDR001", "missing-paths", scope=_SOURCE,
    summary="path does not exist",
    message="path `{path}` does not exist",
    explanation=(
        "The path given on the command line does not exist and does not look like a Hugging Face repo id "
        "(`org/name`). Nothing can be checked without a checkpoint, a `config.json` or a known model."
    ),
    causes=["a typo in the path", "a relative path run from another working directory"],
    fixes=["check the path, or pass a Hugging Face repo id such as `Qwen/Qwen3-Next-80B-A3B-Instruct`"],
    example="gdr-check ./Qwen3-Nxt-80B   # the directory is ./Qwen3-Next-80B",
)

declare(
    "GDR002", "unrecognized-inputs", scope=_SOURCE,
    summary="no checkpoint found",
    message="`{path}` is not a checkpoint: {reason}",
    explanation=(
        "gdr-check reads a `.safetensors` file, a `model.safetensors.index.json` with its shards, a model "
        "directory holding these (with or without `config.json`), a bare `config.json`, or a Hugging Face cache "
        "entry. The path exists but is none of these, so there is nothing to check."
    ),
    causes=[
        "a directory that holds only tokenizer or README files",
        "a file of another type (a GGUF file, a tarball)",
    ],
    fixes=["pass the model directory, its `config.json` or its `.safetensors` files"],
    example="gdr-check ./tokenizer/",
)

declare(
    "GDR003", "pickle-checkpoints", scope=_SOURCE,
    summary="pickle-based checkpoint",
    message="unsupported pickle-based checkpoint `{file}`",
    explanation=(
        "`.bin`, `.pt` and `.pth` weights are Python pickles: loading one can run arbitrary code, and reading "
        "their shapes means unpickling them. gdr-check never unpickles anything, so only safetensors "
        "checkpoints (or a bare `config.json`) can be checked."
    ),
    causes=["an older export saved with `torch.save` or `save_pretrained(safe_serialization=False)`"],
    fixes=[
        "convert it to safetensors (e.g. with the `safetensors` convert script, or `transformers` "
        "`save_pretrained(..., safe_serialization=True)`) and check the converted directory",
        "check the `config.json` alone to get the shapes without a weight cross-check",
    ],
    example="gdr-check ./old-export/pytorch_model.bin",
)

declare(
    "GDR004", "unreadable-files", scope=_SOURCE,
    summary="file cannot be read",
    message="cannot read `{file}`: {reason}",
    explanation=(
        "A file that the checkpoint needs could not be opened or read: missing permissions, an I/O error, or "
        "something that is not a regular file (a FIFO or a device), which gdr-check refuses so that it never "
        "blocks on a read."
    ),
    causes=["file permissions", "a FIFO or device node named like a checkpoint file", "an I/O error"],
    fixes=["make the file readable by the current user, or point at a copy that is"],
    example="chmod 000 model.safetensors && gdr-check .",
)

declare(
    "GDR005", "oversized-json-files", scope=_SOURCE,
    summary="JSON metadata file over the size limit",
    message="{what} is {size} bytes, over the {limit}-byte limit",
    explanation=(
        "`config.json` and `model.safetensors.index.json` are small in every real checkpoint (kilobytes to a "
        "few megabytes). gdr-check caps how much it reads from them so that a hostile or corrupt file cannot "
        "make it use unbounded memory."
    ),
    causes=["a weights file renamed to `config.json`", "a corrupt or hostile index file"],
    fixes=["check that the file is the model's real `config.json` or index"],
    example="gdr-check ./ckpt   # config.json is 2 GB",
)

declare(
    "GDR006", "unresolved-cache-revisions", scope=_SOURCE,
    summary="Hugging Face cache entry has no usable snapshot",
    message="cache entry `{repo}` has no usable snapshot for revision `{revision}`: {reason}",
    explanation=(
        "A Hugging Face cache entry (`models--org--name`) maps the revision `main` to a commit through "
        "`refs/main` and keeps that commit's files under `snapshots/<sha>/`. The ref or the snapshot is "
        "missing, so the files of the cached model cannot be found."
    ),
    causes=["an interrupted download", "a cache cleaned by hand", "a download of another revision only"],
    fixes=["download the model again (`hf download ORG/NAME`)"],
    example="gdr-check ~/.cache/huggingface/hub/models--Qwen--Qwen3-Next-80B-A3B-Instruct   # refs/main removed",
)

declare(
    "GDR007", "model-not-found", scope=_SOURCE,
    summary="model not in the local Hugging Face cache",
    message="`{repo_id}` is neither a local path nor a model in the local Hugging Face cache `{cache_dir}`",
    explanation=(
        "The target looks like a Hugging Face repo id and is not a local path, so it is looked up in the local "
        "cache (`$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`), where it is absent. "
        "Models with a built-in geometry are still checked from that description."
    ),
    causes=["the model was never downloaded on this machine", "the cache lives elsewhere (`HF_HOME`)"],
    fixes=["download it (`hf download ORG/NAME`), or set `HF_HUB_CACHE` to the cache that holds it"],
    example="gdr-check someorg/some-model",
)

declare(
    "GDR008", "incomplete-downloads", scope=_SOURCE,
    summary="file is a partial download",
    message="`{file}` is an incomplete download (`{blob}`)",
    explanation=(
        "The Hugging Face cache writes a file to `blobs/<hash>.incomplete` while it downloads and links the "
        "snapshot entry to the finished blob only at the end. This file still points at a partial blob, so its "
        "header and sizes cannot be trusted."
    ),
    causes=["an interrupted `hf download` or `from_pretrained`"],
    fixes=["run the download again; it resumes the partial file"],
    example="gdr-check Qwen/Qwen3-Next-80B-A3B-Instruct   # while shard 7 is still downloading",
)

declare(
    "GDR009", "dangling-links", scope=_SOURCE,
    summary="link to a missing file",
    message="`{file}` is a link to `{link_target}`, which does not exist",
    explanation=(
        "The checkpoint file is a symbolic link whose target is missing, as happens in a Hugging Face cache "
        "when blobs are deleted or a download was interrupted, and in git-annex or DVC checkouts whose content "
        "was not fetched."
    ),
    causes=["a cache cleaned by hand", "an interrupted download", "`git annex get` or `dvc pull` not run"],
    fixes=["re-download the file the link stands for (`git annex get`, `dvc pull`), or fix the link"],
    example="rm ~/.cache/huggingface/hub/models--org--name/blobs/* && gdr-check org/name",
)

declare(
    "GDR010", "links-outside-hf-cache-blobs", scope=_SOURCE,
    summary="link where none is allowed",
    message="`{file}` is a link to `{link_target}`, outside {allowed}",
    explanation=(
        "gdr-check reads files from strangers, so by default it follows links only where the Hugging Face "
        "cache puts them: a snapshot file pointing into the same repository's `blobs/` directory. Any other "
        "link inside a checkpoint could make it read files the checkpoint does not own. Checkpoints kept as "
        "links on purpose (git-annex, DVC, shared storage) are read with `--follow-links`: still read-only, "
        "header-only and size-capped, the links are then followed wherever they point."
    ),
    causes=[
        "a checkpoint kept in git-annex or DVC, or assembled with symlinks to shared storage",
        "a hostile archive",
    ],
    fixes=[
        "pass `--follow-links` if the links are yours (git-annex, DVC, shared storage), or copy the real files "
        "into the checkpoint directory"
    ],
    example="ln -s /etc/passwd ckpt/model-00001-of-00002.safetensors && gdr-check ckpt",
)

declare(
    "GDR011", "git-lfs-pointers", scope=_SOURCE,
    summary="file is a Git LFS pointer",
    message="is a Git LFS pointer, not the weights: run `git lfs pull`",
    explanation=(
        "A repository that tracks its weights with Git LFS holds, in git itself, a small text pointer "
        "(`version https://git-lfs.github.com/spec/v1`, then the object's hash and size) in place of each large "
        "file. A clone made without `git lfs` installed, or with `GIT_LFS_SKIP_SMUDGE=1`, leaves these "
        "pointers on disk: they have the weights' names but none of their content."
    ),
    causes=["`git clone` of a model repository without `git lfs install`", "`GIT_LFS_SKIP_SMUDGE=1`"],
    fixes=["run `git lfs pull`"],
    example="GIT_LFS_SKIP_SMUDGE=1 git clone <model repository> model && gdr-check model",
)

declare(
    "GDR012", "missing-cache-revisions", scope=_SOURCE,
    summary="revision not in the local Hugging Face cache",
    message="`{repo_id}` has no revision `{revision}` in the local Hugging Face cache (cached: {available})",
    explanation=(
        "`--revision REV` or `org/name@REV` picks one snapshot of a cached model: a branch or tag the cache "
        "has a ref for (`refs/REV`), or a commit hash or a prefix of one naming a snapshot. The cache holds "
        "none of these for the revision asked for; gdr-check never downloads, so it cannot fetch it."
    ),
    causes=["the revision was never downloaded on this machine", "a typo in the branch, tag or hash"],
    fixes=["download that revision (`hf download ORG/NAME --revision REV`), or pick one of the cached revisions"],
    example="gdr-check Qwen/Qwen3-Next-80B-A3B-Instruct@v2",
)

declare(
    "GDR013", "index-without-shards", scope=_SOURCE, severity="info",
    summary="safetensors index present, shards not downloaded",
    message=(
        "none of the {shards} shard(s) listed in `{index}` is present: checked from `config.json` alone "
        "({tensors} tensor names in the index, no shapes read)"
    ),
    explanation=(
        "A download of the JSON files only (`hf download ORG/NAME --include \"*.json\"`) is a common way to "
        "look at a large model: it has the config and the index but no shard. gdr-check then checks the "
        "geometry the config gives, and notes that no tensor shape was cross-checked. When the directory holds "
        "any safetensors file, a shard the index lists but lacks is a missing shard instead (GDR043)."
    ),
    causes=["a download restricted to `*.json`"],
    fixes=["download the shards too to cross-check the weights' shapes"],
    example="hf download Qwen/Qwen3-Next-80B-A3B-Instruct --include \"*.json\" && gdr-check Qwen/Qwen3-Next-80B-A3B-Instruct",
)

# -- config.json ------------------------------------------------------------------------------------------

declare(
    "GDR020", "invalid-config-json", scope=_SOURCE,
    summary="config.json is not valid JSON",
    message="invalid JSON at line {line}, column {column}: {reason}",
    explanation=(
        "The model's `config.json` cannot be parsed as UTF-8 JSON, so the layer map and head counts cannot be "
        "read. Transformers and the serving engines would fail to load it too."
    ),
    causes=["a hand edit that left a trailing comma or a missing quote", "a truncated copy"],
    fixes=["fix the JSON at the reported line and column, or download `config.json` again"],
    example='{"linear_num_value_heads": 32,}',
)

declare(
    "GDR021", "non-object-configs", scope=_SOURCE,
    summary="config.json is not a JSON object",
    message="config holds a JSON {json_type}, not an object",
    explanation=(
        "A model config is a JSON object of named fields. This file parses, but its top level is a list, a "
        "string or a number, so no field can be read from it."
    ),
    causes=["the wrong file saved as `config.json` (e.g. a list of generation configs)"],
    fixes=["replace it with the model's real `config.json`"],
    example="[1, 2, 3]",
)

# -- safetensors headers ----------------------------------------------------------------------------------

declare(
    "GDR030", "truncated-safetensors-files", scope=_SOURCE,
    summary="safetensors file is truncated",
    message="safetensors file is truncated: {actual_size} bytes on disk, {expected_size} expected ({detail})",
    explanation=(
        "A safetensors file is an 8-byte little-endian header length N, N bytes of JSON header, then the "
        "tensor data, whose end the header gives. This file ends before that point, which means a partial "
        "download or copy: some tensors are missing or cut short."
    ),
    causes=["an interrupted download or copy", "a full disk while saving"],
    fixes=["re-download or re-copy this file"],
    example="head -c 1000000 model.safetensors > cut.safetensors && gdr-check cut.safetensors",
)

declare(
    "GDR031", "oversized-safetensors-headers", scope=_SOURCE,
    summary="safetensors header length over the limit",
    message="header length {length} exceeds the {limit}-byte limit",
    explanation=(
        "The first 8 bytes of a safetensors file give the length of its JSON header. Real headers are at most "
        "a few megabytes; the safetensors library itself refuses more than 100 MB. A larger value means the "
        "file is not a safetensors file or its first bytes are corrupt, so gdr-check reads nothing further."
    ),
    causes=["a file of another format renamed to `.safetensors`", "a corrupt first block"],
    fixes=["check that the file is a safetensors file, and re-download it if it is"],
    example="cp model.gguf model.safetensors && gdr-check model.safetensors",
)

declare(
    "GDR032", "malformed-safetensors-headers", scope=_SOURCE,
    summary="safetensors header is malformed",
    message="malformed safetensors header: {reason}",
    explanation=(
        "The header must be UTF-8 JSON: one object mapping each tensor name to `dtype`, `shape` and "
        "`data_offsets`, plus an optional `__metadata__` map of strings, with no duplicate names. This header "
        "breaks that format, so its tensors cannot be described."
    ),
    causes=["a corrupt file", "a writer that does not follow the safetensors format"],
    fixes=["re-download the file, or re-save it with the `safetensors` library"],
    example='{"a": {"dtype": "F32", "shape": [2]}}   # no data_offsets',
)

declare(
    "GDR033", "unknown-tensor-dtypes", scope=_SOURCE,
    summary="tensor has an unknown dtype",
    message="tensor `{tensor}` has unknown dtype `{dtype}`",
    explanation=(
        "Safetensors names its dtypes `F32`, `BF16`, `F8_E4M3`, `I64` and so on. This tensor's dtype is none "
        "of them, so its byte size, and therefore the layout of the whole file, cannot be checked."
    ),
    causes=["a corrupt header", "a writer using a dtype newer than this gdr-check"],
    fixes=["re-save the checkpoint with the `safetensors` library, or upgrade gdr-check"],
    example='{"w": {"dtype": "Q4_K", "shape": [4], "data_offsets": [0, 2]}}',
)

declare(
    "GDR034", "invalid-tensor-shapes", scope=_SOURCE,
    summary="tensor has an invalid shape",
    message="tensor `{tensor}` has invalid shape `{shape}`: {reason}",
    explanation=(
        "A tensor shape is a list of non-negative integers that fit in 64 bits. This one holds something "
        "else (a negative, fractional, overflowing or non-numeric entry), so the tensor cannot be described."
    ),
    causes=["a corrupt header", "a writer bug"],
    fixes=["re-download the file, or re-save it with the `safetensors` library"],
    example='{"w": {"dtype": "F32", "shape": [-1, 4], "data_offsets": [0, 16]}}',
)

declare(
    "GDR035", "tensor-size-mismatches", scope=_SOURCE,
    summary="tensor byte span does not match its shape and dtype",
    message="tensor `{tensor}` spans {span} bytes but its shape and dtype need {expected}",
    explanation=(
        "A tensor's `data_offsets` [begin, end) must cover exactly prod(shape) x itemsize bytes. When they do "
        "not, the shape or dtype in the header is wrong, or the data belongs to another tensor, and any shape "
        "checked from this header would be misleading."
    ),
    causes=["a header edited by hand (e.g. a shape changed without re-saving)", "a writer bug"],
    fixes=["re-save the tensor with the `safetensors` library"],
    example='{"w": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 4]}}   # needs 8 bytes',
)

declare(
    "GDR036", "overlapping-tensors", scope=_SOURCE,
    summary="tensors overlap in the data region",
    message="tensors `{tensor}` and `{other}` overlap in the data region",
    explanation=(
        "Each tensor must own its bytes of the data region. Two tensors whose `data_offsets` overlap alias "
        "each other's data, which the safetensors format forbids and which usually means a corrupt header."
    ),
    causes=["a corrupt header", "a header edited by hand"],
    fixes=["re-save the checkpoint with the `safetensors` library"],
    example='{"a": {..., "data_offsets": [0, 8]}, "b": {..., "data_offsets": [4, 12]}}',
)

declare(
    "GDR037", "invalid-data-offsets", scope=_SOURCE,
    summary="tensor data offsets are invalid",
    message="tensor `{tensor}` has invalid `data_offsets` `{offsets}`: {reason}",
    explanation=(
        "`data_offsets` is a pair of integers [begin, end) relative to the start of the data region, with "
        "begin <= end; sorted by offset, the tensors must tile the data region from 0 with no gaps. These "
        "offsets break that rule, so the header does not describe the file's data."
    ),
    causes=["a corrupt header", "a writer bug"],
    fixes=["re-save the checkpoint with the `safetensors` library"],
    example='{"w": {"dtype": "U8", "shape": [4], "data_offsets": [8, 4]}}',
)

declare(
    "GDR038", "oversized-safetensors-files", scope=_SOURCE,
    summary="safetensors file has bytes after its tensor data",
    message=(
        "safetensors file has {extra} unexpected bytes after its tensor data: {actual_size} bytes on disk, "
        "{expected_size} expected"
    ),
    explanation=(
        "The size of a safetensors file is fully determined by its header: 8 + header length + the end of the "
        "last tensor. This file is longer, so its header does not describe all of its contents (the "
        "safetensors library rejects such files)."
    ),
    causes=["two downloads written into the same file", "a header rewritten with fewer tensors"],
    fixes=["re-download the file, or re-save it with the `safetensors` library"],
    example="cat model.safetensors extra.bin > joined.safetensors && gdr-check joined.safetensors",
)

# -- index and shards -------------------------------------------------------------------------------------

declare(
    "GDR040", "invalid-index-json", scope=_SOURCE,
    summary="safetensors index is not valid JSON",
    message="invalid JSON at line {line}, column {column}: {reason}",
    explanation=(
        "`model.safetensors.index.json` maps every tensor name to the shard file that holds it. It cannot be "
        "parsed as UTF-8 JSON, so the shards cannot be found."
    ),
    causes=["a truncated download", "a hand edit"],
    fixes=["download `model.safetensors.index.json` again"],
    example='{"weight_map": {"lm_head.weight": "model-00001-of-00002.safetensors",}}',
)

declare(
    "GDR041", "malformed-indexes", scope=_SOURCE,
    summary="safetensors index is malformed",
    message="malformed safetensors index: {reason}",
    explanation=(
        "The index must be a JSON object whose `weight_map` maps each tensor name to a shard file name (a "
        "string). This index parses but does not have that form."
    ),
    causes=["an index written by a tool that does not follow the format", "the wrong file in place of the index"],
    fixes=["download `model.safetensors.index.json` again, or regenerate it with `save_pretrained`"],
    example='{"weight_map": ["model-00001-of-00002.safetensors"]}',
)

declare(
    "GDR042", "shard-paths-outside-checkpoint", scope=_SOURCE,
    summary="shard name is not a plain file name",
    message="shard name `{shard}` for tensor `{tensor}` is not a plain file name inside the checkpoint directory",
    explanation=(
        "Shard names in `weight_map` are file names in the checkpoint directory. A name with a path "
        "separator, a `..` component or an absolute path could make a reader open files outside the "
        "checkpoint, so gdr-check refuses the index instead of following it."
    ),
    causes=["a hostile index", "an index hand-edited to point at shards elsewhere"],
    fixes=["move the shards into the checkpoint directory and list them by file name only"],
    example='{"weight_map": {"w": "../../etc/passwd"}}',
)

declare(
    "GDR043", "missing-shards", scope=_SOURCE,
    summary="shard listed in the index is missing",
    message="shard `{shard}` listed in the index does not exist",
    explanation=(
        "The index maps tensors to a shard file that is not in the checkpoint directory, so those tensors "
        "cannot be checked and no engine could load the model."
    ),
    causes=["an interrupted or partial download (e.g. `--include` patterns)", "a shard deleted by hand"],
    fixes=["re-download the missing shard"],
    example="rm model-00003-of-00041.safetensors && gdr-check .",
)

declare(
    "GDR044", "tensors-missing-from-shards", scope=_SOURCE,
    summary="index maps a tensor to a shard that does not hold it",
    message="tensor `{tensor}` is mapped to `{shard}`, whose header does not contain it",
    explanation=(
        "Every tensor in the index's `weight_map` must be present in the header of the shard it maps to. "
        "Otherwise the index and the shards come from different exports, and a loader would fail or load the "
        "wrong weights."
    ),
    causes=["shards from one export mixed with the index of another", "a hand-edited index"],
    fixes=["download the index and all shards of one revision again"],
    example='{"weight_map": {"model.norm.weight": "model-00001-of-00002.safetensors"}}   # it is in 00002',
)

declare(
    "GDR045", "duplicate-tensors", scope=_SOURCE,
    summary="tensor stored in more than one file",
    message="tensor `{tensor}` is stored in both `{shard}` and `{other_shard}`",
    explanation=(
        "Each tensor name must be stored once. When two files of a checkpoint hold the same name, which one "
        "an engine loads depends on its load order, so the checked shapes may not be the ones served."
    ),
    causes=["shards from two exports in one directory", "an old single-file export left next to new shards"],
    fixes=["remove the stale file so that each tensor is stored once"],
    example="model.safetensors and model-00001-of-00002.safetensors side by side",
)
