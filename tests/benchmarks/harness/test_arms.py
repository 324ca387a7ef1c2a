from benchmarks.harness import arms, stores


def test_the_options_name_the_store_and_the_page(tmp_path):
    args = arms.parse(
        ["--output", str(tmp_path)], "x", "Doc.\n\nMore.", ("a", "b"), (1, 2)
    )
    assert (args.arms, args.seeds, args.report_only) == (["a", "b"], [1, 2], False)
    assert args.store == tmp_path / "x.jsonl" and args.page == tmp_path / "x.md"
    again = arms.parse(
        ["--arms", "b", "--seeds", "7", "--report-only"], "x", "", "ab", [1]
    )
    assert (again.arms, again.seeds, again.report_only) == (["b"], [7], True)
    assert again.store == arms.RESULTS / "x.jsonl"


def test_only_what_the_store_lacks_is_run(tmp_path):
    args = arms.parse(["--output", str(tmp_path)], "x", "", ("a", "b"), (1, 2))
    stores.append(args.store, {"arm": "a", "seed": 2, "value": 0})
    ran = []

    def run(arm, seed):
        ran.append((arm, seed))
        return {"value": 10 * seed}

    arms.run_missing(args, run)
    assert ran == [("a", 1), ("b", 1), ("b", 2)]
    records = stores.read(args.store)
    assert [(r["arm"], r["seed"], r["value"]) for r in records[1:]] == [
        ("a", 1, 10),
        ("b", 1, 10),
        ("b", 2, 20),
    ]
    assert all("seconds" in r and "machine" in r["env"] for r in records[1:])
    arms.run_missing(args, run)
    assert len(ran) == 3  # nothing left to run


def test_a_page_keeps_its_hand_written_block(tmp_path):
    page = tmp_path / "x.md"
    assert arms.write_page(page, "# one\n") == "# one\n"
    page.write_text("# one\n\n<!-- hand -->\nmine\n<!-- /hand -->\n")
    written = arms.write_page(page, "# two\n")
    assert written == "# two\n\n<!-- hand -->\nmine\n<!-- /hand -->\n"
    assert page.read_text() == written
