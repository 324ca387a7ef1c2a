import json
import math

from prefbo.loop.demo import main


def test_demo_smoke(tmp_path, capsys):
    summary = main(["--smoke", "--output", str(tmp_path)])
    png, js = tmp_path / "demo.png", tmp_path / "demo_summary.json"
    assert png.exists() and png.stat().st_size > 10_000
    assert js.exists()
    data = json.loads(js.read_text())
    assert data["regret"] == summary["regret"]
    settings = data["settings"]
    iterations, initial = settings["iterations"], settings["initial_pairs"]
    assert data["answers"] == list(range(initial, initial + iterations + 1))
    for name in ("eubo", "random"):
        curve = data["regret"][name]
        assert len(curve) == iterations + 1
        assert all(math.isfinite(r) and r >= 0 for r in curve)
    out = capsys.readouterr().out
    assert f"iter   1/{iterations}" in out
    assert "final regret" in out and "EUBO" in out and "random" in out
