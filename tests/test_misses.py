"""The misses split: a wrong answer the search never generated a right one for, or one it did not choose."""

from helpers_eval_world import FakeScorer, chain_graph, example, prefers_bad, respond, settings
from masprm.answers import is_correct
from masprm.eval.metrics import miss_kind, split_misses
from masprm.eval.runner import ModelSpec, WorkerModels, WorkItem, evaluate_batch


def record(prediction, generated, gold="7", **extra_fields):
    extra = {"generated_answers": generated} if generated is not None else {}
    return {"prediction": prediction, "gold": gold, "correct": is_correct(prediction, gold),
            "extra": {**extra, **extra_fields}, "error": None}


RECORDS = [
    record("Answer: 7", ["Answer: 5", "Answer: 7"]),               # a hit
    record("Answer: 5", ["Answer: 5", "Answer: 7"]),               # 7 was there: not chosen
    record("Answer: 5", ["Answer: 5", "so it is 7"]),              # 7 in other words: not chosen
    record("Answer: 5", ["Answer: 5", "Answer: 6"]),               # never generated
    record("Answer: 5", None),                                     # a log without the list
    {**record("Answer: 7", ["Answer: 7"]), "error": "boom", "correct": False},   # a crashed example
]


def test_each_record_gets_its_kind():
    assert [miss_kind(r, is_correct) for r in RECORDS] == [None, "not_chosen", "not_chosen", "not_generated",
                                                           "unknown", "unknown"]


def test_split_counts_hits_and_each_kind_of_miss():
    assert split_misses(RECORDS, is_correct) == {"hits": 1, "not_generated": 1, "not_chosen": 2, "unknown": 2}
    assert split_misses([], is_correct) == {"hits": 0, "not_generated": 0, "not_chosen": 0, "unknown": 0}


def test_records_list_every_final_answer_the_search_generated(fake_policy):
    # SBS keeping two beams under a scorer that prefers the "bad" plan: it returns 5, though the other
    # beam's 7 was generated; a single beam never generates 7 at all.
    policy, prm = fake_policy(respond), FakeScorer(prefers_bad)
    models = WorkerModels({"policy": ModelSpec("policy", "p"), "masprm": ModelSpec("scorer", "s")},
                          loader=lambda spec: policy if spec.model_type == "policy" else prm, release=lambda spec: None)

    def run(b1):
        item = WorkItem(0, "sbs_prm", ("masprm",), settings(b1=b1, b2=3).method_settings("sbs_prm"), example())
        [(_, record, error)] = evaluate_batch(models, [item], seed=0, graph=chain_graph())
        assert error is None
        return record

    runs = {b1: run(b1) for b1 in (2, 1)}
    assert runs[2]["prediction"] == "Answer: 5" and runs[2]["extra"]["generated_answers"] == ["Answer: 5", "Answer: 7"]
    assert miss_kind(runs[2], is_correct) == "not_chosen"
    assert runs[1]["extra"]["generated_answers"] == ["Answer: 5"] and miss_kind(runs[1], is_correct) == "not_generated"
