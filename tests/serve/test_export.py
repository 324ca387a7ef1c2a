import csv
import io
import json

from prefbo.serve import flow
from prefbo.serve.export import export_csv, export_json
from prefbo.serve.rows import MadeQuestion


def test_exports_hold_every_answer_in_plain_columns(store, make_config):
    config = make_config(no_preference=True)
    store.set_study_source(config.source)
    pid = store.add_participant("t", "Eve")
    q = flow.current(store, config, pid)
    q1 = flow.answer(store, config, pid, q["question_id"], 1)
    flow.undo(store, config, pid, q["question_id"])
    carried = [[[0.1, 0.2], [0.0, 0.2]]]  # a worker's question on a face
    made = MadeQuestion(pid, 2, [[0.0, 0.2], [0.9, 0.8]], 1, carried)
    assert store.queue_question(made)
    q1 = flow.answer(store, config, pid, q["question_id"], 0)
    flow.answer(store, config, pid, q1["question_id"], None)
    rows = list(csv.DictReader(io.StringIO(export_csv(store, config))))
    assert [(r["seq"], r["choice"], r["no_preference"]) for r in rows] == [
        ("0", "0", "0"),
        ("1", "", "1"),
    ]
    assert rows[0]["label"] == "Eve"
    assert float(rows[0]["option1.sweetness"]) == q["options"][1]["sweetness"]
    assert int(rows[0]["option0.size"]) == q["options"][0]["size"]
    data = json.loads(json.dumps(export_json(store, config)))  # plain JSON
    assert data["study"] == config.source and data["schema_version"] == 5
    kinds = [e["kind"] for e in data["events"]]
    assert kinds == ["join", "answer", "undo", "answer", "answer"]
    assert data["events"][1]["data"]["choice"] == 1  # the undone answer stays
    shown = [q["seq"] for q in data["questions"]]
    assert shown == [0, 1, 2]  # the third: shown, not answered
    assert data["questions"][0]["values"][0] == q["options"][0]
    virtual = [q["virtual_comparisons"] for q in data["questions"]]
    assert virtual == [None, None, carried]


def test_csv_cells_that_a_spreadsheet_would_run_are_neutralised(store, make_config):
    # OWASP's CSV injection rule: a text cell starting with = + - @ tab or
    # carriage return gets a leading quote; numbers stay numbers
    config = make_config(
        space=[
            {"name": "x", "type": "continuous", "lower": -5.0, "upper": -1.0},
            {"name": "tag", "type": "categorical", "choices": ["@home", "+1"]},
        ]
    )
    store.set_study_source(config.source)
    labels = ['=HYPERLINK("http://x","y")', "+1", "-2", "@SUM(A1)", "\tx", "\rx"]
    for i, label in enumerate(labels):
        pid = store.add_participant(f"t{i}", label)
        q = flow.current(store, config, pid)
        flow.answer(store, config, pid, q["question_id"], 0)
    rows = list(csv.DictReader(io.StringIO(export_csv(store, config))))
    assert [r["label"] for r in rows] == ["'" + label for label in labels]
    assert all(r["option0.tag"] in ("'@home", "'+1") for r in rows)
    assert all(float(r["option0.x"]) < 0 for r in rows)  # a number, unquoted
    plain = store.add_participant("t-plain", "Ann = 1")
    q = flow.current(store, config, plain)
    flow.answer(store, config, plain, q["question_id"], 0)
    rows = list(csv.DictReader(io.StringIO(export_csv(store, config))))
    assert rows[-1]["label"] == "Ann = 1"
