"""How much of the GPU the engine plans to take."""

from dragoman.engine.memory import CPU_MAX_ROWS, CPU_ROWS, DEFAULT_GPU_MEMORY, MemoryPlan, plan_cpu, plan_memory


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


def test_a_cpu_step_has_more_rows_only_for_a_small_model():
    per_token = 12 * 2 * 1024 * 4  # 600M's float32 cache
    published = plan_cpu(12 * 14 * 1024**2 + 256206 * 1024, per_token, 1024)
    assert published == MemoryPlan(CPU_ROWS, 4096)
    small = plan_cpu(60_000, 2 * 2 * 32 * 4, 128)  # the tests' model: a step of 32 rows would be all overhead
    assert CPU_ROWS < small.rows <= CPU_MAX_ROWS and small.rows & (small.rows - 1) == 0
    assert small.cache_tokens == small.rows * 128  # never more than the rows can fill
