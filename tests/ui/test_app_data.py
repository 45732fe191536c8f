"""AppTest: the Data page (sample on start, uploads, mapping, errors, synthetic demo)."""

from __future__ import annotations

import gzip

import pandas as pd
from apptest_support import (
    SAMPLE,
    assert_clean,
    errors,
    goto,
    new_app,
    texts,
)

HOSTILE = "<script>alert('x')</script> **bold** [link](javascript:alert(1))"


def _metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def _upload(at, name: str, data: bytes, mime: str = "text/csv"):
    at.segmented_control(key="data:source").set_value("upload").run()
    at.file_uploader(key="data:file").upload(name, data, mime)
    return at.run()


def test_opens_on_the_bundled_sample(runs_root) -> None:
    at = new_app().run()
    assert_clean(at)
    expected = len(pd.read_csv(SAMPLE, dtype=str, keep_default_na=False))
    assert at.title[0].value == "Data"
    metrics = _metrics(at)
    assert metrics["Rows read"] == f"{expected:,}"
    assert metrics["Included"] == f"{expected:,}"
    assert at.session_state["app:dataset"].name == SAMPLE.name
    assert "The bundled sample is loaded." in texts(at)
    # the row preview holds real rows of the sample
    preview = at.dataframe[-1].value
    assert len(preview) == 25 and "hypothesis" in preview.columns


def test_empty_state_without_any_dataset(runs_root) -> None:
    at = new_app(autoload=False).run()
    assert_clean(at)
    assert "No dataset is loaded yet" in texts(at)
    assert at.session_state["app:dataset"] is None if "app:dataset" in at.session_state \
        else True


def test_missing_sample_is_explained_not_raised(runs_root, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("AFLITE_SAMPLE", str(tmp_path / "nowhere.csv"))
    at = new_app().run()
    assert not at.exception
    assert "No dataset is loaded yet" in texts(at)
    assert "bundled sample is missing" in texts(at)


def test_binary_garbage_shows_a_specific_error(runs_root) -> None:
    at = _upload(new_app(autoload=False).run(), "garbage.csv", b"\x00\xff\xfe\x00" * 64)
    assert not at.exception
    assert len(at.error) == 1
    message = errors(at)[0]
    assert message.startswith("garbage.csv: line 1")  # names the file and the line
    assert "utf-8" in message and "Encoding" in message  # and what to do in the dashboard


def test_missing_label_column_lists_the_columns(runs_root) -> None:
    data = b"sentence,verdict_text\nA cat sleeps.,yes\nA dog runs.,no\n"
    at = _upload(new_app(autoload=False).run(), "nolabel.csv", data)
    assert not at.exception
    # no label column can be guessed: the mapping asks for one, nothing is loaded yet
    assert "app:dataset" not in at.session_state or at.session_state["app:dataset"] is None
    at.button(key=[b.key for b in at.button if b.key.startswith("data:load:")][0]).click().run()
    assert not at.exception
    assert "Choose the columns first" in errors(at)[0]


def test_upload_with_guessed_mapping_and_exclusions(runs_root) -> None:
    frame = pd.DataFrame({
        "sentence1": ["A man plays.", "Two dogs run.", "A girl reads.", "Kids swim."],
        "sentence2": ["A person plays.", "Cats sleep.", "Nobody reads.", "Kids are wet."],
        "gold_label": ["entailment", "-", "contradiction", "entailment"],
    })
    data = gzip.compress(frame.to_csv(index=False).encode())
    at = _upload(new_app(autoload=False).run(), "mini.csv.gz", data, "application/gzip")
    assert_clean(at)
    dataset = at.session_state["app:dataset"]
    assert dataset.name == "mini.csv.gz"
    assert dataset.columns.label == "gold_label" and dataset.columns.premise == "sentence1"
    assert _metrics(at)["Excluded"] == "1"
    reasons = at.dataframe[3].value if len(at.dataframe) > 3 else None
    assert any("label '-'" in str(df.value.to_dict()) for df in at.dataframe), reasons


def test_explicit_mapping_of_unusual_columns(runs_root) -> None:
    data = b"txt,y,fold\nThe film was fine.,pos,train\nAwful.,neg,train\nGreat.,pos,test\n"
    at = _upload(new_app(autoload=False).run(), "reviews.csv", data)
    file_key = [k for k in at.session_state if str(k).startswith("data:hypothesis:")][0]
    suffix = str(file_key).split(":", 2)[2]
    at.selectbox(key=f"data:hypothesis:{suffix}").set_value("txt")
    at.selectbox(key=f"data:label:{suffix}").set_value("y")
    at.selectbox(key=f"data:split:{suffix}").set_value("fold")
    at.button(key=f"data:load:{suffix}").click().run()
    assert_clean(at)
    dataset = at.session_state["app:dataset"]
    assert dataset.columns.hypothesis == "txt" and dataset.columns.premise is None
    assert dataset.report.label_counts == {"pos": 2, "neg": 1}


def test_choosing_none_for_premise_and_split_is_respected(runs_root) -> None:
    """'(none)' used to be sent as None, and the loader guessed the column again."""
    frame = pd.DataFrame({"premise": ["A man plays.", "Two dogs run.", "A girl reads."] * 4,
                          "hypothesis": ["A person plays.", "Cats sleep.", "Nobody reads."] * 4,
                          "label": ["entailment", "contradiction", "neutral"] * 4,
                          "split": ["train", "train", "test"] * 4})
    at = _upload(new_app(autoload=False).run(), "nli.csv", frame.to_csv(index=False).encode())
    dataset = at.session_state["app:dataset"]  # loaded with the guesses first
    assert dataset.columns.premise == "premise" and dataset.columns.split == "split"
    # texts repeat: grouped automatically (by premise here: linking premises and hypotheses
    # would make groups of a third of this tiny file)
    assert dataset.columns.group == "premise"
    suffix = str([k for k in at.session_state
                  if str(k).startswith("data:hypothesis:")][0]).split(":", 2)[2]
    at.selectbox(key=f"data:premise:{suffix}").set_value("(none)")
    at.selectbox(key=f"data:split:{suffix}").set_value("(none)")
    at.button(key=f"data:load:{suffix}").click().run()
    assert_clean(at)
    dataset = at.session_state["app:dataset"]
    assert dataset.columns.premise is None and dataset.columns.split is None
    assert dataset.columns.group is None  # no premise, nothing repeats
    at.selectbox(key=f"data:group:{suffix}").set_value("label")
    at.button(key=f"data:load:{suffix}").click().run()
    assert at.session_state["app:dataset"].columns.group == "label"


def test_multiple_choice_expansion(runs_root) -> None:
    data = (b"context,A,B,C,answer\n"
            b"Where do fish live?,in water,in trees,on roofs,A\n"
            b"What is hot?,ice,fire,snow,B\n")
    at = _upload(new_app(autoload=False).run(), "mc.csv", data)
    suffix = str([k for k in at.session_state
                  if str(k).startswith("data:hypothesis:")][0]).split(":", 2)[2]
    at.radio(key=f"data:layout:{suffix}").set_value("wide").run()
    at.multiselect(key=f"data:choices:{suffix}").set_value(["A", "B", "C"])
    at.selectbox(key=f"data:answer:{suffix}").set_value("answer")
    at.button(key=f"data:load:{suffix}").click().run()
    assert_clean(at)
    dataset = at.session_state["app:dataset"]
    assert len(dataset.frame) == 6
    assert dataset.report.label_counts == {"wrong": 4, "right": 2}
    assert _metrics(at)["Questions expanded"] == "2"


def test_per_choice_multiple_choice_from_the_data_page(runs_root) -> None:
    """ARCT-like rows, one per choice: the question column makes questions of them."""
    rows = ["qid,claim,warrant,gold"]
    for q in range(4):
        rows += [f"q{q},claim {q},warrant a{q},{1 if q % 2 else 0}",
                 f"q{q},claim {q},warrant b{q},{0 if q % 2 else 1}"]
    at = _upload(new_app(autoload=False).run(), "long.csv", "\n".join(rows).encode() + b"\n")
    suffix = str([k for k in at.session_state
                  if str(k).startswith("data:hypothesis:")][0]).split(":", 2)[2]
    at.radio(key=f"data:layout:{suffix}").set_value("per_choice").run()
    at.selectbox(key=f"data:question:{suffix}").set_value("qid")
    at.selectbox(key=f"data:hypothesis:{suffix}").set_value("warrant")
    at.selectbox(key=f"data:premise:{suffix}").set_value("claim")
    at.selectbox(key=f"data:label:{suffix}").set_value("gold")
    at.button(key=f"data:load:{suffix}").click().run()
    assert_clean(at)
    dataset = at.session_state["app:dataset"]
    assert dataset.report.n_questions == 4 and len(dataset.frame) == 8
    assert dataset.report.label_counts == {"right": 4, "wrong": 4}
    assert list(dataset.frame["gold"].astype(str)) == ["0", "1", "1", "0", "0", "1", "1", "0"]


def test_hostile_text_is_shown_as_text(runs_root) -> None:
    frame = pd.DataFrame({"premise": ["p1", "p2", "p3"], "hypothesis": [HOSTILE, "b", "c"],
                          "label": ["x", "y", "x"]})
    at = _upload(new_app(autoload=False).run(), "hostile.csv",
                 frame.to_csv(index=False).encode())
    assert_clean(at)
    # the text reaches the page only as table data, never as Markdown or HTML
    assert any(HOSTILE in df.value.to_string() for df in at.dataframe)
    assert "<script>" not in texts(at)
    assert not at.get("html")


def test_synthetic_demo_is_one_click_away(runs_root) -> None:
    at = new_app(autoload=False).run()
    at.segmented_control(key="data:source").set_value("synthetic").run()
    at.select_slider(key="data:synthetic_n").set_value(1000)
    at.button(key="data:synthetic_go").click().run()
    assert_clean(at)
    dataset = at.session_state["app:dataset"]
    assert len(dataset.frame) == 1000
    assert set(dataset.report.label_counts) == {"outer circle", "inner circle"}
    assert at.session_state["app:embeddings"].endswith(".npy")
    # the Audit page offers the demo's own features
    goto(at, "audit")
    assert_clean(at)
    rep = [s for s in at.selectbox if str(s.key).startswith("audit:representation:")][0]
    assert rep.value == "precomputed"


def test_a_folder_of_shards_on_the_server_loads_with_the_same_mapping(
        runs_root, tmp_path, monkeypatch) -> None:
    rows = pd.read_csv(SAMPLE, dtype=str, keep_default_na=False)
    folder = tmp_path / "snli_parts"
    folder.mkdir()
    for i in range(2):
        rows.iloc[i::2].to_parquet(folder / f"part-{i}.parquet", index=False)
    at = new_app().run()
    at.segmented_control(key="data:source").set_value("path").run()
    at.text_input(key="data:server_path").set_value(str(folder / "nothing-*.parquet")).run()
    assert not at.exception
    assert any("no such file, folder or matching shard" in e for e in errors(at))
    at.text_input(key="data:server_path").set_value(str(folder)).run()
    assert_clean(at)
    dataset = at.session_state["app:dataset"]
    assert dataset.name == "snli_parts" and dataset.report.n_included == len(rows)
    assert sorted(dataset.hypotheses()) == sorted(rows["hypothesis"])
    assert "read 2 shards" in texts(at)
    # AFLITE_DATA_ROOTS limits what the page may read
    monkeypatch.setenv("AFLITE_DATA_ROOTS", str(tmp_path / "elsewhere"))
    at.text_input(key="data:server_path").set_value(str(folder / "part-0.parquet")).run()
    assert any("outside the folders this server reads data from" in e for e in errors(at))
