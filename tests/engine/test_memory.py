"""How much of the GPU the engine plans to take."""

from dragoman.engine.memory import DEFAULT_GPU_MEMORY, plan_memory


def test_the_gpu_memory_for_translation_bounds_the_rows_and_caches():
    per_token, per_row = 12 * 2 * 1024 * 2, 256206 * 2  # 600M in bfloat16: K/V of 12 layers; a row's logits
    plan = plan_memory(DEFAULT_GPU_MEMORY, per_token, per_row, 1024)
    assert plan.rows == 512  # a power of two whose logits, and the smaller buckets', take a quarter at most
    assert 1.45 * 2**30 < plan.cache_bytes(per_token)
    assert 2 * plan.rows * per_row + plan.cache_bytes(per_token) <= DEFAULT_GPU_MEMORY
    smaller = plan_memory(DEFAULT_GPU_MEMORY // 4, per_token, per_row, 1024)
    assert smaller.rows == 128 and smaller.cache_tokens < plan.cache_tokens / 3
    # Never more than half of what is free, nor than the rows can fill.
    assert plan_memory(64 << 30, per_token, per_row, 1024, free=2 * DEFAULT_GPU_MEMORY) == plan
    assert plan_memory(64 << 30, per_token, per_row, 20).cache_tokens == 2048 * 20
