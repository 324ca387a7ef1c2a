# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Sessions with a person: `prefbo session new` / `resume`
#
# With a real person the loop runs in a terminal:
#
# ```bash
# prefbo session new tea.jsonl --space space.json --strategy eubo --seed 0
# prefbo session resume tea.jsonl      # later, or after a crash
# ```
#
# Each question lists the options with the variables' names; the person types
# `1`..`q` to choose, `u` to undo the last answer or `q` to quit. Here we drive
# the same command line from Python with a *scripted* stdin, so the tutorial
# runs unattended (`SMOKE_TEST=1` is the test suite's tiny mode; this
# tutorial is small either way). `TUTORIAL_OUTPUT` names the output folder.

# %%
import io
import json
import os
import warnings
from pathlib import Path

from prefbo.cli import main
from prefbo.exceptions import SessionLogWarning
from prefbo.loop.optimizer import PreferentialOptimizer

SMOKE_TEST = bool(os.environ.get("SMOKE_TEST"))
OUTPUT = Path(os.environ.get("TUTORIAL_OUTPUT", "tutorial_output"))
OUTPUT.mkdir(parents=True, exist_ok=True)

# %% [markdown]
# ## The design space
# `space.json` names the variables and their bounds.

# %%
space = OUTPUT / "space.json"
space.write_text(
    json.dumps(
        {
            "variables": [
                {"name": "sugar_g", "lower": 0, "upper": 10},
                {"name": "steep_min", "lower": 1, "upper": 6},
            ]
        }
    )
)
log = OUTPUT / "tea.jsonl"
if log.exists():
    log.unlink()  # `session new` refuses to overwrite a log

# %% [markdown]
# ## A first sitting
# The script answers 1, 2, then withdraws the second answer (`u`), answers 1
# and quits. Every answer is on disk (written, flushed and fsync'ed) before
# the next question is shown.

# %%
stdout = io.StringIO()
answers = "1\n2\nu\n1\nq\n"
status = main(
    ["session", "new", str(log), "--space", str(space), "--seed", "0"],
    stdin=io.StringIO(answers),
    stdout=stdout,
)
print(stdout.getvalue())
assert status == 0

# %% [markdown]
# ## The durable log
# One JSON object per line: a header with the optimizer's settings, then
# `tell` records (the options asked and the chosen index) and `undo` records.
# The log is append-only (an undo is a new record, never an edit), and each
# line carries a CRC-32 checksum, so damage is detected.

# %%
for line in log.read_text().splitlines():
    record = json.loads(line)
    print(record["type"], {k: v for k, v in record.items() if k not in ("config",)})

# %% [markdown]
# ## A crash mid-write, and resuming
# Suppose the machine died while writing an answer: the last line is torn.
# `resume` reports it, cuts it and keeps every earlier answer; the optimizer
# is rebuilt by replaying the log, so its next question is exactly the one
# the first process would have asked.

# %%
with open(log, "a") as f:
    f.write('{"type": "tell", "seq": 99, "opti')  # torn: no newline, bad JSON

stdout = io.StringIO()
status = main(
    ["session", "resume", str(log)], stdin=io.StringIO("2\nq\n"), stdout=stdout
)
print(stdout.getvalue())
assert status == 0 and "warning:" in stdout.getvalue()

# %% [markdown]
# ## The same session from Python
# `PreferentialOptimizer.resume` reads the log (checking settings you pass,
# e.g. `seed=0`) and continues appending to it.

# %%
with warnings.catch_warnings():
    warnings.simplefilter("error", SessionLogWarning)  # the log is clean now
    opt = PreferentialOptimizer.resume(log, seed=0)
x, mean, sd = opt.best()
print(f"{len(opt.history)} answers in force; best so far {x.tolist()}")
(OUTPUT / "session_summary.json").write_text(
    json.dumps({"answers": len(opt.history), "best": x.tolist()})
)
