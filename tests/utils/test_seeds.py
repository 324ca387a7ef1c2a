"""The seed derivations: their values are the contract of resumed logs and
replays, so they are pinned to literal numbers (computed by hand)."""

from prefbo.utils import seeds


def test_each_derivation_keeps_its_value():
    assert seeds.fit_seed(3) == 23_757
    assert seeds.fit_seed(3, 10) == 23_767  # 3 * 7919 + 10
    assert seeds.retry_seed(5, 2) == 15_843  # 5 + 2 * 7919
    assert seeds.question_seed(3, 10) == 3_000_019  # 3 * 1000003 + 10
    # (3 * 1000003 + 10) * 1009 + 4
    assert seeds.participant_question_seed(3, 10, 4) == 3_027_019_175
    # ((2 * 1000003 + 5) * 1009 + 1) * 1009 + 7
    assert seeds.person_question_seed(2, 5, 1, 7) == 2_036_173_199_907
    assert seeds.participant_seed(3, 4) == 300_013  # 3 * 100003 + 4
    assert seeds.batch_question_seed(23_767, 2) == 23_769  # 23767 + 2
    # ((1 * 1000003 + 2) * 10007 + 3) * 101 + 1
    assert seeds.uniform_question_seed(1, 2, 3, 1) == 1_010_712_053_839


def test_different_participants_and_steps_get_different_seeds():
    values = {
        seeds.participant_question_seed(0, k, p) for k in range(50) for p in range(50)
    }
    assert len(values) == 2500
