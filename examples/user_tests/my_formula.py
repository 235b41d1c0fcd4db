"""The user's own formulas for the largest Qwen2-VL image, in placeholder tokens.

An image is resized to sides that are multiples of 28 pixels (patch 14, 2x2 merge) with an
area in [min_pixels, max_pixels]; each 28 x 28 cell is one token.
"""
import math


def max_image_tokens(max_pixels: int, max_ratio: int = 200) -> int:
    """The most cells an unresized image can have: the largest n <= max_pixels / 28^2 with a
    factor pair a x b (a <= b) whose aspect ratio an input can reach (b <= max_ratio * a)."""
    for n in range(max_pixels // 28 ** 2, 0, -1):
        if any(n % a == 0 and n // a <= max_ratio * a for a in range(1, math.isqrt(n) + 1)):
            return n
    return 0


def square_rule_tokens(max_pixels: int) -> int:
    """The largest square image's tokens (how vLLM 0.9's dummy image was sized)."""
    side = math.isqrt(max_pixels) // 28
    return side * side
