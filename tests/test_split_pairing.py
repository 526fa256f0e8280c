"""Train and dev compared class by class (framework.debug.split_pairing): an input transform, a feature order, a class
numbering or labels that differ between the splits are each named by the shape that explains them; splits that agree
(whatever their class frequencies, with noise added to train only, or too few examples to tell) are quiet. Also the
learning watch's first-sight gap: a dev loss that rises after dev was already worse than new train data is not called
overfitting, and an evaluation path that scores the train data worse is tested for reading the padding."""

from __future__ import annotations

import numpy as np

from conftest import zoo_log
from framework.datasets.extern_data import DataKey
from framework.debug.label_steps import label_steps_finding
from framework.debug.split_pairing import pairing_findings
from framework.debug.split_undo import Scores

DATA = DataKey("x", (6,), "float32")
LABEL = DataKey("y", (), "int64", 5)
CENTRES = np.random.default_rng(9).normal(size=(5, 6)) * 2


def _batches(x: np.ndarray, y: np.ndarray, size: int = 32) -> list:
    return [
        (np.arange(i, min(i + size, len(y))), {"x": x[i : i + size], "y": y[i : i + size]})
        for i in range(0, len(y), size)
    ]


def _split(seed: int, n: int = 600, priors=None) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.choice(5, size=n, p=priors)
    return CENTRES[y] + rng.normal(size=(n, 6)), y


def _messages(train, dev, data=DATA, label=LABEL) -> list[tuple[str, str]]:
    samples = {"train": _batches(*train), "dev": _batches(*dev)}
    return [(p.finding.severity, p.finding.message) for p in pairing_findings(samples, data, label)]


def test_splits_that_agree_are_quiet_whatever_their_class_frequencies_or_train_only_noise():
    train, dev = _split(0), _split(1, priors=[0.6, 0.1, 0.1, 0.1, 0.1])
    assert _messages(train, dev) == []
    noisy = (train[0] + np.random.default_rng(2).normal(size=train[0].shape) * 0.5, train[1])
    assert _messages(noisy, dev) == []


def test_dev_standardised_with_its_own_statistics_is_an_input_transform():
    (xt, yt), (xd, yd) = _split(0), _split(1, priors=[0.6, 0.1, 0.1, 0.1, 0.1])
    mean, std = xt.mean(0), xt.std(0)
    found = _messages(((xt - mean) / std, yt), ((xd - xd.mean(0)) / xd.std(0), yd))
    assert len(found) == 1 and found[0][0] == "warning", found
    assert (
        "The inputs 'x' in dev are those of train scaled and shifted per feature, for every class of 'y'" in found[0][1]
    )
    assert _messages(((xt - mean) / std, yt), ((xd - mean) / std, yd)) == []  # the twin: train's statistics


def test_pixels_divided_by_255_twice_are_named_by_the_scale():
    (xt, yt), (xd, yd) = _split(0), _split(1)
    found = _messages((np.abs(xt), yt), (np.abs(xd) / 255, yd))
    assert "A scale of about 1/255: pixel values divided by 255 once more in dev." in found[0][1]


def test_colour_channels_in_another_order_are_named_with_the_channels():
    data = DataKey("x", (4, 4, 3), "float32")
    rng = np.random.default_rng(3)
    colours = rng.uniform(0, 1, size=(5, 3))

    def images(seed):
        r = np.random.default_rng(seed)
        y = r.integers(0, 5, size=500)
        return colours[y][:, None, None, :] + r.normal(size=(500, 4, 4, 3)) * 0.1, y

    (xt, yt), (xd, yd) = images(0), images(1)
    found = _messages((xt, yt), (xd[..., ::-1], yd), data=data)
    assert found and found[0][0] == "warning"
    assert "The features of 'x' come in another order in dev than in train" in found[0][1]
    assert "dev's 0 = train's 2, dev's 2 = train's 0" in found[0][1]
    assert _messages((xt, yt), (xd, yd), data=data) == []


def test_channels_first_images_with_label_maps_are_compared_per_pixel_and_undone_in_their_layout():
    # torch's layout: images [3, H, W], label maps [H, W]; dev's loader reverses the colour channels
    data, label = DataKey("x", (3, 6, 6), "float32"), DataKey("y", (6, 6), "int64", 4)
    colours = np.random.default_rng(3).uniform(0, 1, size=(4, 3))

    def scenes(seed):
        r = np.random.default_rng(seed)
        y = r.integers(0, 4, size=(400, 6, 6))
        x = colours[y].transpose(0, 3, 1, 2) + r.normal(size=(400, 3, 6, 6)) * 0.1
        return [(np.arange(i, i + 20), {"x": x[i : i + 20], "y": y[i : i + 20]}) for i in range(0, 400, 20)]

    train, dev = scenes(0), scenes(1)
    swapped = [(i, raw | {"x": raw["x"][:, ::-1]}) for i, raw in dev]
    found = pairing_findings({"train": train, "dev": swapped}, data, label)
    assert found and found[0].finding.severity == "warning", found
    assert "The features of 'x' come in another order in dev than in train" in found[0].finding.message
    assert "dev's 0 = train's 2, dev's 2 = train's 0" in found[0].finding.message
    # the experiment that decides whether it hurts puts the channels back in the arrays the step is given
    undone = found[0].undo.apply(swapped[0][1])
    assert undone["x"].shape == (20, 3, 6, 6) and np.array_equal(undone["x"], dev[0][1]["x"])
    assert pairing_findings({"train": train, "dev": dev}, data, label) == []


def test_classes_numbered_by_a_mapping_built_per_split_are_named():
    (xt, yt), (xd, yd) = _split(0), _split(1)
    renumbered = np.array([0, 1, 3, 4, 2])[yd]  # class names sorted otherwise in dev
    found = _messages((xt, yt), (xd, renumbered))
    assert found and "The classes of 'y' are numbered otherwise in dev than in train" in found[0][1]
    assert "dev's 3 = train's 2" in found[0][1]


def test_per_frame_labels_blended_between_classes_in_train_only_are_named_with_both_sides():
    data, label = DataKey("x", (None, 3), "float32"), DataKey("y", (None,), "int64", 5)
    colours = np.random.default_rng(4).uniform(-2, 2, size=(5, 3))

    def tagged(seed, blended):
        r = np.random.default_rng(seed)
        batches = []
        for start in range(0, 400, 16):
            ys = np.zeros((16, 20), dtype=np.int64)
            for row in range(16):
                a, b = sorted(r.choice(5, size=2, replace=False))
                ys[row] = np.where(np.arange(20) < 10, a, b)
            x = colours[ys] + r.normal(size=(16, 20, 3)) * 0.2
            if blended:  # the frames at the border get the rounded mean of the two ids
                ys[:, 7:13] = (ys[:, 6:7] + ys[:, 13:14] + 1) // 2
            raw = {"x": x, "x:seq_len": np.full(16, 20), "y": ys, "y:seq_len": np.full(16, 20)}
            batches.append((np.arange(start, start + 16), raw))
        return batches

    samples = {"train": tagged(0, True), "dev": tagged(1, False)}
    found = [p.finding for p in pairing_findings(samples, data, label)]
    assert found and found[0].severity == "warning", found
    assert "The labels 'y' of train disagree with their inputs" in found[0].message
    assert "They look like classes on both sides of" in found[0].message
    # train's labels follow its inputs by a rule of their own: not reordered apart
    assert "Within train its labels agree with its inputs" in found[0].message
    assert pairing_findings({"train": tagged(0, False), "dev": tagged(1, False)}, data, label) == []


def test_dev_texts_reordered_without_their_labels_are_named_and_too_few_examples_are_not():
    data, label = DataKey("t", (12,), "int64", 50), DataKey("y", (), "int64", 2)

    def texts(seed, n, shuffled=False):
        r = np.random.default_rng(seed)
        y = r.integers(0, 2, size=n)
        t = r.integers(10, 50, size=(n, 12))
        t[:, :3] = np.where(y[:, None] == 1, r.integers(0, 5, size=(n, 3)), r.integers(5, 10, size=(n, 3)))
        if shuffled:
            t = t[r.permutation(n)]
        return [(np.arange(i, i + 20), {"t": t[i : i + 20], "y": y[i : i + 20]}) for i in range(0, n, 20)]

    found = pairing_findings({"train": texts(0, 600), "dev": texts(1, 400, shuffled=True)}, data, label)
    assert found and "The labels 'y' of dev disagree with their inputs" in found[0].finding.message
    # dev's own halves tell the two causes apart: its labels are independent of its inputs (reordered apart)
    assert "Within dev too its labels are independent of its inputs" in found[0].finding.message
    assert pairing_findings({"train": texts(0, 600), "dev": texts(1, 400)}, data, label) == []
    # A vocabulary seen a few times per word: the rule is only as good on dev as on held-out train data
    sparse = DataKey("t", (6,), "int64", 400)
    polarity = np.random.default_rng(5).choice([-1, 1], size=400)

    def sentences(seed, n):
        r = np.random.default_rng(seed)
        t = r.integers(0, 400, size=(n, 6))
        y = (polarity[t].sum(1) > 0).astype(np.int64)
        return [(np.arange(i, i + 20), {"t": t[i : i + 20], "y": y[i : i + 20]}) for i in range(0, n, 20)]

    assert pairing_findings({"train": sentences(0, 300), "dev": sentences(1, 600)}, sparse, label) == []


def test_a_run_names_dev_rescaled_once_undoing_it_helps_and_notes_a_scale_the_model_normalises_away():
    # one epoch each (the comparison is made at the start, its experiment on the first epoch's model)
    bug = zoo_log("classify.py", "cause_classify_dev_rescaled.py", num_epochs=1)
    assert "WARNING sanity check: The inputs 'data' in dev are those of train scaled and shifted per feature" in bug
    assert "It costs this model: with the scale and offset of 'data' undone, ce on dev's first 8 batches is" in bug
    twin = zoo_log("classify.py", "cause_classify_dev_rescaled.py", bug=False, num_epochs=1)
    assert "in dev are those of train" not in twin and "WARNING" not in twin
    # dev x 10, and a model that standardises each example first: the same shape, and no harm
    harmless = zoo_log("classify.py", "cause_classify_dev_rescaled.py", normalised_inside=True, num_epochs=1)
    assert "Note sanity check: The inputs 'data' in dev are those of train scaled and shifted" in harmless
    assert "It does not hurt this model: with the scale and offset of 'data' undone" in harmless
    assert "WARNING" not in harmless


def test_a_difference_no_transform_explains_is_measured_by_moving_the_class_means_back_and_stays_a_note():
    # the experiment uses dev's labels: it shows how much of the gap the difference accounts for, not that it is a bug
    bug = zoo_log("classify.py", "cause_classify_dev_rectified.py", num_epochs=1)
    assert "Note sanity check: The inputs 'data' of the classes of 'classes' differ between train and dev, not" in bug
    assert "It costs this model: with the difference of the class means of 'data' (" in bug
    assert "So the gap between dev and train is in the data the model is given" in bug
    assert "Not decided whether dev's inputs are prepared otherwise than train's" in bug
    assert "WARNING sanity check" not in zoo_log(
        "classify.py", "cause_classify_dev_rectified.py", bug=False, num_epochs=1
    )
    # the same difference in features the model does not read: a note that it does not hurt
    ignored = zoo_log("classify.py", "cause_classify_dev_rectified.py", reads_first_half=True, num_epochs=1)
    assert "Note sanity check: The inputs 'data' of the classes of 'classes' differ between train and dev" in ignored
    assert "It does not hurt this model: with the difference of the class means of 'data'" in ignored
    assert "WARNING sanity check" not in ignored


def test_moving_the_class_means_back_moves_each_example_by_its_own_class_and_leaves_padding_alone():
    from framework.debug.split_undo import class_mean_undo

    shift = np.array([[1.0, 0.0], [0.0, -2.0]])  # class 0: feature 3 by +1; class 1: feature 5 by -2
    images = class_mean_undo("x", "y", np.array([3, 5]), [0, 1], shift, feature_axis=True)
    x = np.zeros((2, 1, 4, 6), dtype=np.float32)
    moved = images.apply({"x": x, "y": np.array([0, 1])})["x"]
    assert moved.dtype == np.float32 and (moved[0, ..., 3] == 1).all() and (moved[1, ..., 5] == -2).all()
    assert moved.sum() == 4 * 1 - 4 * 2  # nothing else moved
    frames = class_mean_undo("x", "y", np.array([3, 5]), [0, 1], shift, feature_axis=True)
    arrays = {"x": np.zeros((1, 3, 6)), "y": np.array([[0, 1, 0]]), "x:seq_len": np.array([2])}
    moved = frames.apply(arrays)["x"]
    assert moved[0, 0, 3] == 1 and moved[0, 1, 5] == -2 and (moved[0, 2] == 0).all()  # frame 2 is padding
    wave = class_mean_undo("x", "y", np.array([0]), [0, 1], np.array([[0.5], [0.0]]), feature_axis=False)
    moved = wave.apply({"x": np.zeros((2, 4)), "y": np.array([0, 1]), "x:seq_len": np.array([4, 2])})["x"]
    assert (moved[0] == 0.5).all() and (moved[1] == 0).all()
    assert (wave.apply({"x": np.zeros(2), "y": np.array([0, 1])})["x"] == [0.5, 0]).all()


def test_an_input_constant_in_one_split_is_no_evidence_of_labels_that_disagree():
    # domain-adversarial training: train holds labelled source examples (domain 0) and target examples with a
    # placeholder label 0 (domain 1); dev is the target domain, every example domain 1, with its real labels
    rng = np.random.default_rng(0)
    source = rng.integers(0, 2, size=400)
    order = rng.permutation(800)  # interleaved
    train_y, train_d = np.concatenate([source, np.zeros(400, dtype=np.int64)])[order], np.repeat([0, 1], 400)[order]
    dev_y, dev_d = rng.integers(0, 2, size=300), np.ones(300, dtype=np.int64)
    domain, label = DataKey("x", (), "int64", 2), DataKey("y", (), "int64", 2)
    found = _messages((train_d, train_y), (dev_d, dev_y), data=domain, label=label)
    assert found and all(severity == "note" for severity, _ in found)  # the domain differs, and that is a note
    # the flag as one column of a dense key beside a feature that carries the labels: that column is left out
    x_train = np.stack([train_d, train_y + rng.normal(size=800)], axis=1).astype(np.float32)
    x_dev = np.stack([dev_d, dev_y + rng.normal(size=300)], axis=1).astype(np.float32)
    dense = DataKey("x", (2,), "float32")
    found = _messages((x_train, train_y), (x_dev, dev_y), data=dense, label=label)
    assert not any(severity == "warning" and "disagree" in message for severity, message in found)


def test_undoing_a_difference_decides_only_once_the_model_has_learned():
    hurts = Scores("ce", other=[2.0, 2.1, 1.9, 2.0], undone=[0.2, 0.3, 0.1, 0.2], train=0.1)
    assert hurts.verdict(chance=1.386) == "hurts" and round(hurts.closed, 2) == 0.95
    assert hurts.verdict(chance=None) == "hurts"
    harmless = Scores("ce", other=[0.5, 0.6, 0.4, 0.5], undone=[0.5, 0.59, 0.41, 0.5], train=0.1)
    assert harmless.verdict(chance=1.386) == "harmless"
    # the same numbers from a model still at its chance level on train decide nothing
    assert Scores("ce", other=[1.4] * 4, undone=[1.39] * 4, train=1.3).verdict(chance=1.386) == "undecided"
    # most of the gap closed, but on half the batches only: not decided
    assert Scores("ce", other=[2.0, 2.0, 2.0, 2.0], undone=[0.1, 0.1, 2.1, 2.1], train=0.1).verdict(None) == "undecided"


def test_dev_worse_than_new_train_data_in_epoch_1_is_not_called_overfitting_and_is_one_problem():
    text = zoo_log("classify.py", "cause_classify_train_relabelled_by_rule.py")
    assert "WARNING sanity check: The labels 'classes' of train disagree with their inputs" in text
    assert "WARNING learning watch: dev_ce rose for 2 epochs" in text
    assert "Not decided yet, and not shown to be overfitting: already in epoch 1" in text
    assert "overfitting: dev_ce rose" not in text  # the claim the gap between the splits would have made
    assert "(also reported by: learning watch)" in text  # one record for the problem
    # at the end of epoch 1, a note: the same train batches score alike in both paths, so the data differ
    assert "Note learning watch: dev_ce is " in text
    assert "the evaluation path agrees on the train data, so train and dev data differ" in text


def test_dev_inputs_that_vary_more_within_every_class_are_named_and_train_only_variation_is_not():
    train, (xd, yd) = _split(0), _split(1)
    noisy_dev = (xd + np.random.default_rng(6).normal(size=xd.shape) * 2.5, yd)
    found = _messages(train, noisy_dev)
    assert found and found[0][0] == "warning"
    assert "The inputs 'x' vary more within each class of 'y' in dev than in train" in found[0][1]
    assert _messages(noisy_dev, train) == []  # wider in train: augmentation in training, not judged


def test_an_evaluation_path_that_reads_the_padding_is_named_when_it_scores_the_train_data_worse():
    bug = zoo_log("cause_eval_path_unmasked_pooling.py")
    assert "WARNING learning watch: dev_ce is " in bug
    assert "the evaluation path scores the same train data worse, and it reads the padding: with 37 more padded" in bug
    assert "WARNING" not in zoo_log("cause_eval_path_unmasked_pooling.py", bug=False)


def test_the_shorter_sequences_of_a_batch_run_with_and_without_the_padding_only_the_longest_needed():
    import torch

    from framework.debug.padding_probe import _shorter_sequences

    batch = {
        "data": torch.arange(4 * 6).view(4, 6),
        "data:seq_len": torch.tensor([6, 3, 4, 6]),
        "classes": torch.tensor([0, 1, 0, 1]),
    }
    padded, cropped, removed = _shorter_sequences(batch, "data")
    assert removed == 2 and padded["data"].shape == (2, 6) and cropped["data"].shape == (2, 4)
    assert padded["classes"].tolist() == [1, 0] and cropped["data:seq_len"].tolist() == [3, 4]
    assert _shorter_sequences({**batch, "data:seq_len": torch.tensor([6, 6, 6, 3])}, "data") is None


def test_class_ids_averaged_at_boundaries_in_one_split_are_named_and_in_both_are_not():
    label = DataKey("y", (None,), "int64", 6)

    def regions(seed, averaged):
        r = np.random.default_rng(seed)
        batches = []
        for start in range(0, 320, 16):
            ys = np.zeros((16, 40), dtype=np.int64)
            for row in range(16):
                ids = r.integers(0, 6, size=5)
                ys[row] = np.repeat(ids, 8)
                if averaged:  # a frame at each boundary gets the rounded mean of its neighbours, as a linear resize
                    for edge in range(8, 40, 8):
                        ys[row, edge] = (ys[row, edge - 1] + ys[row, edge + 1] + 1) // 2
            batches.append((np.arange(start, start + 16), {"y": ys, "y:seq_len": np.full(16, 40)}))
        return batches

    found = label_steps_finding({"train": regions(0, True), "dev": regions(1, False)}, label)
    assert found is not None and found.severity == "warning"
    assert "The labels 'y' of train hold ids between their neighbours' at region boundaries" in found.message
    assert label_steps_finding({"train": regions(0, False), "dev": regions(1, False)}, label) is None
    # ordinal labels that vary smoothly by design do so in every split
    assert label_steps_finding({"train": regions(0, True), "dev": regions(1, True)}, label) is None


def test_inputs_negated_at_random_in_dev_are_not_blamed_on_train_labels():
    # dev's inputs negated per example (a polarity augmentation left on in dev), labels as they are: dev's own halves
    # agree with their labels less than train's do, so no split's labels are called consistent or shuffled
    (xt, yt), (xd, yd) = _split(0), _split(1)
    flip = np.random.default_rng(5).choice([-1.0, 1.0], size=(len(yd), 1))
    found = _messages((xt, yt), (xd * flip, yd))
    assert found, "the pairing still differs between the splits"
    assert all("Within train" not in message and "Within dev" not in message for _, message in found)
