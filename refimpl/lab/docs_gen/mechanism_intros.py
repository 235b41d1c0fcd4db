"""The pages of docs/mechanisms/: one ``Page`` per change of the ladder, its rows of
refimpl/variants.py and its hand-written intro (the only prose of a page that is not generated).

Read by refimpl.lab.docs_gen.mechanism_pages, which builds the rest of each page.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Page:
    slug: str
    title: str
    kind: str  # "startup" or "encoder_len": which table of refimpl/variants.py the rows are in
    rows: tuple[str, ...]
    intro: str


PAGES = (
    Page("01-pr17935-profiling-cache-and-reset", "0.8.5 -> 0.9.0: the processing cache during profiling, "
         "then reset_mm_cache (PR #17935)", "startup", ("0.8.5", "0.9.0"), """
Before 0.9.0 every start-up pass that needs the worst-case items processed them from scratch:
the profiling entry points asked for no cache (PR #14336). PR #17935 lets them use the
process's processing cache even when the user turned caching off, so the budget lookups after
the first (passes #2 and #5) find what pass #1 stored, and adds `reset_mm_cache()`, called at the
end of start-up, to free the dummy outputs. One call gains nothing: the cached path hashes every
item, splits and stores the outputs and calls the HF processor again on the text, which is why
the reviewer's one-call timing showed the branch slower (`refimpl bench startup --calls 2`
repeats it). 0.9.0's hasher glues dtype, shape and data and joins them: 3 copies of an array."""),
    Page("02-pr24866-pr24989-whisper-encoder-length", "0.10.2 -> 0.11.0: Whisper's encoder length "
         "read from the config (PRs #24866, #24989)", "encoder_len",
         ("0.10.2", "0.10.2+#24866", "0.10.2+#24989", "0.11.0"), """
In 0.10.2 four call sites besides `VllmConfig.__post_init__` ask
`MULTIMODAL_REGISTRY.get_encdec_max_encoder_len` for Whisper's encoder length (1500), and the
registry keeps nothing: three processor creations and a 30 s float64 dummy clip through the
feature extractor and the hasher on every call. The
cross-attention metadata builder asks on every forward step, the scheduler on every admission
attempt, the runner once, the KV check once per decoder layer and once more.
`VllmConfig.__post_init__` already stored the answer in
`scheduler_config.max_num_encoder_input_tokens`; PR #24866 made the metadata builder read that
field, PR #24989 the scheduler, the runner and the KV check. Both shipped in 0.11.0. The review
warned that the field is the encoder length only while `__post_init__` overrides it (see the
0.13.0 page)."""),
    Page("03-v0.9.2-hasher-and-formula", "0.9.0 -> 0.9.2: the hasher without tobytes (PR #19484) "
         "and max tokens by formula (PR #19756)", "startup", ("0.9.0", "0.9.0+#19484", "0.9.0+#19756", "0.9.2"), """
0.9.2 shipped two start-up changes together. PR #19756 gives Qwen2/2.5-VL a formula for the
max tokens per item (`get_max_tokens_per_item`), so the budget lookups (passes #1, #2, #5)
process no dummy data; only the profile run's item is processed. PR #19484 hashes an array's
buffer instead of `tobytes()`: 2 full copies per hash instead of 3. The one-change rows put
each on 0.9.0 alone, so the ladder does not credit the hasher with what the formula saved."""),
    Page("04-v0.10.2-frame-fit-and-runner-cache", "0.9.2 -> 0.10.2: frames fitted to the whole "
         "sequence, a profiling cache that honours the user", "startup", ("0.9.2", "0.10.2"), """
Between 0.9.2 and 0.10.2 the dummy video's frames are fitted to the whole `seq_len` (until
0.10.1 the image tokens were taken out first: 12 frames at 128k, then 14, so 98,304 -> 114,688
tokens per video). 0.10.1 stops filling a cache the user disabled during profiling, and 0.10.2
profiles with the runner's own cache (`MultiModalBudget.cache`, absent at 0 GiB; the
scheduler's lookup passes none). The profile run reuses the runner's lookup (no pass #2) and
encodes `budget // tokens` items instead of `cdiv`; the processor hashes items even without a
cache (every Whisper registry call pays it)."""),
    Page("05-v0.11.0-stream-hasher-14-frames-profile-dummy", "0.10.2 -> 0.11.0: the streaming hasher "
         "(PR #24925), 14 frames, the profile dummy at max_model_len (PR #25553)", "startup",
         ("0.10.2", "0.9.0+#24925", "0.11.0"), """
PR #24925 feeds key and value chunks straight into blake3: no full copy of an array per hash
(its one-change row puts it on 0.9.0). The dummy video is capped at 14 frames instead of 16
(at 128k the fitting gives 14 anyway). PR #25553 builds the profile run's dummy at
`max_model_len`, so the encoder is profiled with the item the budget was sized for (14 frames,
114,688 tokens at 128k) instead of a one-frame video at `max_num_batched_tokens`: the profiled
peak now covers the largest item, and the int64 dummy video grows to 4.3 GB."""),
    Page("06-v0.11.1-uint8-video-and-reset-scope", "0.11.0 -> 0.11.1: a uint8 dummy video, the engine "
         "core's profiling cache cleared", "startup", ("0.11.0", "0.9.0+uint8", "0.11.1"), """
0.11.1 builds the dummy video with `dtype=np.uint8`: an eighth of the int64 array numpy chose
for `np.full(shape, 255)` in every earlier release (0.54 GB instead of 4.32 GB for 14 frames
of 3584 x 3584). Its `reset_mm_cache` also reaches the runner's profiling cache
(`model_executor.reset_mm_cache()`), so with two processes the engine core no longer keeps the
dummy outputs after start-up (`reset_scope`, read by the two-process engine; in-process one
registry cache stands for both). Serving: its `check_stop` (PR #26317) tests the last token's EOS
and stop ids before `max_tokens` / `max_model_len`, so EOS sampled as the last allowed token
finishes "stop", where 0.8.5 to 0.11.0 said "length" (`stop_check`, set on the scheduler by
`EngineCore`)."""),
    Page("07-v0.13.0-pr29421-encoder-budget", "0.11.0 -> 0.13.0: Whisper's encoder budget from "
         "max_num_batched_tokens, cross-attention sized from it (PR #29421)", "encoder_len",
         ("0.11.0", "0.13.0", "audios-per-step"), """
PR #29421 ("Whisper Enable Encoder Batching") stopped `VllmConfig` from setting
`max_num_encoder_input_tokens` to the encoder length, so the encoder budget follows
`max_num_batched_tokens` (8192 holds 5 audios per step; the metadata follows the scheduled
lengths, PR #29268). But the scheduler, the runner's block table and the KV check still read
that field as the encoder length: each request reserves `cdiv(8192, 16)` = 512 cross-attention
blocks instead of 94, the hazard the #24989 review warned about. refimpl reproduces the sizing
and refuses the row by default (`check_encoder_len`). `audios-per-step` is ours: a budget of N
audios with the per-item length in a field of its own at every site."""),
    Page("08-v0.13.0-pr29692-worst-case-image", "0.11.1 -> 0.13.0: the worst-case image from the "
         "closest factor pair (PR #29692)", "startup", ("0.11.1", "0.13.0"), """
Up to 0.12 the worst-case image is `smart_resize` of a 9999999 x 9999999 square; 0.13.0 lays
out the closest factor pair of the largest cell count. Neither is always the true maximum: at
`max_pixels` of 30 cells the square gives 25 tokens, the factor pair 30 and a 3200 x 16 strip 77;
at 768 * 28^2 the square gives 756 x 756 (729 tokens), the pair 896 x 672 (768); with
min = max = 256 * 28^2 a 1 x 200 image gives 454. refimpl's `true-max`
(`worst_case_image_size`) searches those shapes. At the default max_pixels all three give
3584 x 3584 (16,384 tokens), so the pass table below does not move."""),
    Page("09-v0.14.0-scheduler-fix", "0.13.0 -> 0.14.0: the scheduler's cross-attention length fixed, "
         "the runner's and the KV check's not", "encoder_len", ("0.13.0", "0.14.0"), """
0.14.0 gives the scheduler its own length (`_num_encoder_max_input_tokens`, one registry call
at construction), so admission allocates 94 cross-attention blocks again. The runner's block
table (`max(max_model_len, max_encoder_len)` wide) and `CrossAttentionSpec`'s memory check
still read the batching budget: 512 blocks each at 8192 batched tokens. refimpl's guard still
refuses the row by default."""),
    Page("10-refimpl-default", "0.13.0 -> refimpl: the kit's default start-up", "startup",
         ("0.13.0", "refimpl"), """
The kit's default is the latest release's start-up plus what refimpl fixes: the true
worst-case image, no frame cap, the profile dummy at the per-item maximum the budget and
admission use (admission refuses a larger item than the one profiled), an item larger than the
processing cache served uncached (PR #53016, after 0.14.0), float32 dummy audio, Whisper's max
tokens by formula, and no hashing without a cache."""),
    Page("11-shape-only", "refimpl -> shape-only: the profile run without an HF pass", "startup",
         ("refimpl", "shape-only"), """
Ours, a what-if: the profile run's inputs are built at their processed shapes from the
processor's size functions (`get_dummy_processed_inputs`, zero values) instead of processing a
dummy item, so start-up runs no HF-processor pass at all and builds no dummy video. The encoder
still runs on those inputs, so the profiled peak is the same. refimpl.testing's shape oracle
uses the same builder on meta tensors."""),
)
