"""The tiling table and the persisted tuning cache (kernel/tiling.py): no GPU needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gdr_check.kernel import tiling
from gdr_check.kernel.tiling import TileConfig, choose_config, pick_config, record_tuning, tuned_config


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "tiling.json"
    monkeypatch.setenv(tiling.TUNING_CACHE_ENV, str(path))
    tiling.reload_tuning_cache()
    yield path
    tiling.reload_tuning_cache()


def record(head_rows: int, config: TileConfig, variant: str = "gdn", device: str = "GPU X", state: int = 4) -> dict:
    return {"variant": variant, "device": device, "K": 128, "V": 128, "state_bytes": state, "head_rows": head_rows,
            "config": config}


def test_tuned_config_is_the_nearest_tuned_size_at_or_below(cache: Path) -> None:
    record_tuning([record(8, TileConfig(2)), record(256, TileConfig(16, evict_first=True)),
                   record(4096, TileConfig(32, num_warps=2))])
    assert tuned_config("gdn", "GPU X", 8, 128, 128, 4) == TileConfig(2)
    assert tuned_config("gdn", "GPU X", 255, 128, 128, 4) == TileConfig(2)
    assert tuned_config("gdn", "GPU X", 256, 128, 128, 4) == TileConfig(16, evict_first=True)
    assert tuned_config("gdn", "GPU X", 10**6, 128, 128, 4) == TileConfig(32, num_warps=2)
    assert tuned_config("gdn", "GPU X", 1, 128, 128, 4) == TileConfig(2)  # below every record: the smallest
    # Other variant, device or state width: not tuned, so the built-in table decides.
    assert tuned_config("kda", "GPU X", 256, 128, 128, 4) is None
    assert tuned_config("gdn", "GPU Y", 256, 128, 128, 4) is None
    assert tuned_config("gdn", "GPU X", 256, 128, 128, 2) is None
    assert choose_config("gdn", "GPU Y", 256, 128, 128, 4) == pick_config(256, 128, 128, 4, "gdn").fitted(128, 128)
    assert choose_config("gdn", "GPU X", 4096, 128, 128, 4) == TileConfig(32, num_warps=2)


def test_records_merge_and_a_later_record_replaces_the_same_key(cache: Path) -> None:
    record_tuning([record(32, TileConfig(4)), record(32, TileConfig(8), variant="kda")])
    record_tuning([record(32, TileConfig(16))])
    assert tuned_config("gdn", "GPU X", 32, 128, 128, 4) == TileConfig(16)
    assert tuned_config("kda", "GPU X", 32, 128, 128, 4) == TileConfig(8)
    assert len(json.loads(cache.read_text())["records"]) == 2


def test_a_damaged_cache_is_ignored_record_by_record(cache: Path) -> None:
    cache.write_text(json.dumps({"records": [
        {"variant": "gdn", "device": "GPU X", "K": 128, "V": 128, "state_bytes": 4, "head_rows": 64,
         "config": {"block_v": 0}},  # invalid: skipped
        {"variant": "gdn"},  # incomplete: skipped
        {"variant": "gdn", "device": "GPU X", "K": 128, "V": 128, "state_bytes": 4, "head_rows": 64,
         "config": {"block_v": 8, "num_warps": 2, "unknown_field": 1}},
    ]}))
    assert tuned_config("gdn", "GPU X", 64, 128, 128, 4) == TileConfig(8, num_warps=2)
    cache.write_text("{not json")
    tiling.reload_tuning_cache()
    assert tuned_config("gdn", "GPU X", 64, 128, 128, 4) is None
    assert choose_config("gdn", "GPU X", 64, 128, 128, 4) == pick_config(64, 128, 128, 4, "gdn").fitted(128, 128)


def test_a_tuned_config_is_fitted_to_the_head(cache: Path) -> None:
    record_tuning([record(8, TileConfig(64, 4, num_warps=2))])
    fitted = choose_config("gdn", "GPU X", 8, 128, 128, 4)
    assert fitted == TileConfig(64, 2, num_warps=2)  # 64 rows x 2 tiles cover V = 128
