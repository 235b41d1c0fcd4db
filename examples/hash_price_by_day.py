"""Issue 43's hashing diagnosis: the cost model's hash price against the committed start-ups, each ladder
priced with the calibration of its own day (docs/cost-model.md "Hashing at 16k-64k").

    PYTHONPATH=. python examples/hash_price_by_day.py

Per ladder and row that hashes by a copying byte path (0.9.0: v0.9.0, 0.9.2 and 0.10.2: v0.9.2): the largest
item hashed (GiB), measured hash_s (median) and four prices of it: A the model's (the small and 1 GiB rates,
linear in log2 of the item's size between), B the small rate plus the copies' first touch by the int64 fill's
size dependence, C the small rate alone, E the first hashing pass at A's rate and the rest at the small one.
"""
import statistics

from refimpl.engine.startup_plan import StartupPlan
from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.specs import spec_from_params
from refimpl.lab.bench.startup import make_vllm_config
from refimpl.lab.env import REPO_ROOT
from refimpl.lab.explore.cost_model import Calibration
from refimpl.multimodal.hasher import HASH_COPIES

GiB = 1 << 30
R = REPO_ROOT / "results" / "cpu-amd-epyc-2c"
DAYS = ("same-day-2026-12-04", "same-day-2026-12-04-fresh-96k", "same-day-2026-12-04-no-reporting",
        "same-day-2026-12-04-no-reporting-2", "same-day-2026-12-04-no-reporting-3", "same-day-2026-12-03-evening")


def prices(plan: StartupPlan, cal: Calibration) -> dict[str, float]:
    r, path, out, first = cal.rates, plan.variant.mm.hash_byte_path, dict.fromkeys("ABCE", 0.0), True
    fill = r.fill_s_per_gib["int64"]
    for s in (s for s in plan.steps if s.hashed):
        for i in s.items:
            rate, g = r.hash_s_per_gib[f"{path}.{i.kind}"], i.nbytes / GiB
            a, c = g * r.sized(rate, i.nbytes), g * rate.small
            touch = g * HASH_COPIES[path][i.kind] * (r.sized(fill, i.nbytes) - fill.small) if i.kind == "ndarray" else 0.0
            out["A"] += a
            out["B"] += c + touch
            out["C"] += c
            out["E"] += a if first else c
        first = False
    return out


def main() -> None:
    pairs = [(R / d / "calibration.json", sorted((R / d).glob("startup_*.json"))) for d in DAYS]
    pairs.append((R / "calibration_2026-12-03.json", sorted(R.glob("startup_*_2026-12-03.json"))))
    errors: dict[str, list[float]] = {}
    for calp, ladders in pairs:
        cal = Calibration.load(calp)
        for lp in ladders:
            res = Result.load(lp)
            for v in ("0.9.0", "0.9.2", "0.10.2"):
                runs = res.variants.get(v, {}).get("runs")
                if not runs:
                    continue
                spec = spec_from_params("startup", {**res.params, "max_model_len": runs[0].get("max_model_len")})
                plan = StartupPlan.build(make_vllm_config(spec.replace(device="cpu")), v)
                meas = statistics.median(x["parts_s"]["hash_s"] for x in runs)
                item = max((i.nbytes for s in plan.steps for i in s.items), default=0) / GiB
                p = prices(plan, cal)
                print(f"{calp.parent.name:<36} {lp.stem[34:]:<30} {v:<6} item {item:.2f} GiB  measured {meas:6.1f} s  "
                      + "  ".join(f"{k} {x:6.1f} ({x / meas - 1:+.0%})" for k, x in p.items()))
                for k, x in p.items():
                    errors.setdefault(k, []).append(abs(x / meas - 1))
    print("median |error|, max |error|: " + ", ".join(
        f"{k} {statistics.median(e):.0%} {max(e):.0%}" for k, e in errors.items()))


if __name__ == "__main__":
    main()
