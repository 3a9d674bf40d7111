//! Task lifecycle in the mock runtime: publishers, synthetic issuance, commit-reveal, agreement,
//! liars, silence, late and wrong reveals, re-issues, credit amounts, removal.

use crate::{mock::*, settlement::result_commitment, *};
use ergon_drill::MatmulChain;
use frame_support::{assert_noop, assert_ok, traits::fungible::InspectHold, BoundedVec};
use pallet_trainer_staking::SlashReason;
use sp_core::H256;
use sp_runtime::DispatchError;

const BOND: u128 = 1_000;
const PUBLISHER: u64 = 30;

/// Bonds each of `trainers` and registers it as a driller.
fn bond(trainers: impl IntoIterator<Item = u64>) {
    for who in trainers {
        assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(who), BOND));
        assert_ok!(Drilling::set_driller(RuntimeOrigin::signed(who), true));
    }
}

fn chain(seed: u8) -> TaskKind {
    TaskKind::MatmulChain(MatmulChain { seed: [seed; 32], dim: 96, length: 3 })
}

fn approved_publisher() {
    assert_ok!(Drilling::register_publisher(RuntimeOrigin::signed(PUBLISHER)));
    assert_ok!(Drilling::approve_publisher(RuntimeOrigin::root(), PUBLISHER));
}

/// Publishes `kind` for `r` executors and runs to the block that draws them; returns the task id.
fn publish(kind: TaskKind, r: u32) -> TaskId {
    let id = NextTaskId::<Test>::get();
    assert_ok!(Drilling::publish_task(RuntimeOrigin::signed(PUBLISHER), kind, r));
    run_to_block(System::block_number() + 1);
    id
}

fn task(id: TaskId) -> TaskOf<Test> {
    Tasks::<Test>::get(id).expect("task stored")
}

fn executors(id: TaskId) -> Vec<u64> {
    task(id).executors.iter().map(|e| e.who).collect()
}

/// The honest result of a matrix-chain task.
fn honest(id: TaskId) -> H256 {
    match task(id).kind {
        TaskKind::MatmulChain(chain) => H256(chain.run_reference()),
        TaskKind::QuantizedInference { .. } => panic!("not a matrix chain"),
    }
}

fn salt(who: u64) -> H256 {
    H256::repeat_byte(who as u8)
}

fn commit(id: TaskId, who: u64, result: H256) {
    let commitment = result_commitment(id, &who, result, salt(who));
    assert_ok!(Drilling::commit_result(RuntimeOrigin::signed(who), id, commitment));
}

fn reveal(id: TaskId, who: u64, result: H256) {
    assert_ok!(Drilling::reveal_result(RuntimeOrigin::signed(who), id, result, salt(who)));
}

fn drilling_credit(who: u64) -> u128 {
    ComputePower::compute_power(&who).drilling
}

fn slashes() -> Vec<(u64, SlashReason)> {
    System::events()
        .into_iter()
        .filter_map(|r| match r.event {
            RuntimeEvent::Drilling(Event::ExecutorSlashed { who, reason, .. }) => {
                Some((who, reason))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn only_eligible_drillers_get_tasks_and_stale_ones_can_be_pruned() {
    new_test_ext().execute_with(|| {
        // 1–4 drill; 5–6 are bonded trainers that run no driller; 7 has no bond.
        bond(1..=4);
        for who in 5..=6 {
            assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(who), BOND));
        }
        assert_noop!(
            Drilling::set_driller(RuntimeOrigin::signed(7), true),
            Error::<Test>::NotEligible
        );
        run_to_block(21);
        let count = synthetic_tasks_by_trainer(1);
        assert_eq!(count.keys().copied().collect::<Vec<_>>(), vec![1, 2, 3, 4]);
        approved_publisher();
        let id = publish(chain(1), 4);
        let mut who = executors(id);
        who.sort();
        assert_eq!(who, vec![1, 2, 3, 4]);

        // Stopping is always allowed; a driller whose bond fell below the minimum can be pruned by
        // anyone, an eligible one only by itself.
        assert_ok!(Drilling::set_driller(RuntimeOrigin::signed(4), false));
        assert!(!Drillers::<Test>::contains_key(4));
        assert_noop!(
            Drilling::prune_driller(RuntimeOrigin::signed(9), 3),
            Error::<Test>::StillEligible
        );
        assert_ok!(TrainerStaking::unbond(RuntimeOrigin::signed(3), BOND));
        assert_ok!(Drilling::prune_driller(RuntimeOrigin::signed(9), 3));
        assert_noop!(
            Drilling::prune_driller(RuntimeOrigin::signed(9), 3),
            Error::<Test>::NotADriller
        );
        assert_eq!(issuance::candidates::<Test>().len(), 2);
    });
}

#[test]
fn publishers_register_with_a_deposit_and_publish_once_approved() {
    new_test_ext().execute_with(|| {
        let reason = HoldReason::PublisherDeposit.into();
        assert_noop!(
            Drilling::publish_task(RuntimeOrigin::signed(PUBLISHER), chain(1), 2),
            Error::<Test>::NotRegistered
        );
        assert_ok!(Drilling::register_publisher(RuntimeOrigin::signed(PUBLISHER)));
        assert_eq!(Balances::balance_on_hold(&reason, &PUBLISHER), 500);
        assert_noop!(
            Drilling::register_publisher(RuntimeOrigin::signed(PUBLISHER)),
            Error::<Test>::AlreadyRegistered
        );
        assert_noop!(
            Drilling::publish_task(RuntimeOrigin::signed(PUBLISHER), chain(1), 2),
            Error::<Test>::NotApproved
        );
        assert_noop!(
            Drilling::approve_publisher(RuntimeOrigin::signed(1), PUBLISHER),
            DispatchError::BadOrigin
        );
        assert_noop!(
            Drilling::approve_publisher(RuntimeOrigin::root(), 1),
            Error::<Test>::NotRegistered
        );
        assert_ok!(Drilling::approve_publisher(RuntimeOrigin::root(), PUBLISHER));
        assert_noop!(
            Drilling::approve_publisher(RuntimeOrigin::root(), PUBLISHER),
            Error::<Test>::AlreadyApproved
        );
        assert_ok!(Drilling::publish_task(RuntimeOrigin::signed(PUBLISHER), chain(1), 2));
        assert_eq!(PublishedTasks::<Test>::get(PUBLISHER), 1);

        // Leaving releases the deposit; revocation with a slash burns it.
        assert_ok!(Drilling::deregister_publisher(RuntimeOrigin::signed(PUBLISHER)));
        assert_eq!(Balances::balance_on_hold(&reason, &PUBLISHER), 0);
        assert_eq!(Balances::free_balance(PUBLISHER), ENDOWMENT);
        assert_ok!(Drilling::register_publisher(RuntimeOrigin::signed(PUBLISHER)));
        let issuance = Balances::total_issuance();
        assert_ok!(Drilling::revoke_publisher(RuntimeOrigin::root(), PUBLISHER, true));
        assert_eq!(Balances::total_issuance(), issuance - 500);
        assert_eq!(Balances::free_balance(PUBLISHER), ENDOWMENT - 500);
        assert_noop!(
            Drilling::deregister_publisher(RuntimeOrigin::signed(PUBLISHER)),
            Error::<Test>::NotRegistered
        );
        // A poor account cannot register.
        assert_noop!(
            Drilling::register_publisher(RuntimeOrigin::signed(99)),
            Error::<Test>::InsufficientBalance
        );
        Drilling::do_try_state().unwrap();
    });
}

#[test]
fn published_tasks_are_validated_and_bounded() {
    new_test_ext().execute_with(|| {
        approved_publisher();
        let publish = |kind, r| Drilling::publish_task(RuntimeOrigin::signed(PUBLISHER), kind, r);
        let zero_dim = TaskKind::MatmulChain(MatmulChain { seed: [0; 32], dim: 0, length: 1 });
        assert_noop!(publish(zero_dim, 2), Error::<Test>::InvalidTask);
        // Worth less than a micro-ut.
        let tiny = TaskKind::MatmulChain(MatmulChain { seed: [0; 32], dim: 2, length: 1 });
        assert_noop!(publish(tiny, 2), Error::<Test>::InvalidTask);
        assert_noop!(publish(inference(b"ftp://x"), 2), Error::<Test>::InvalidTask);
        assert_noop!(publish(chain(1), 1), Error::<Test>::ReplicationOutOfRange);
        assert_noop!(publish(chain(1), 8), Error::<Test>::ReplicationOutOfRange);
        for seed in 0..3 {
            assert_ok!(publish(chain(seed), 2));
        }
        assert_noop!(publish(chain(9), 2), Error::<Test>::TooManyPublishedTasks);
        let difficulty = MatmulChain { seed: [0; 32], dim: 96, length: 3 }.difficulty_micro_ut();
        assert_eq!(task(0).difficulty, difficulty);
        assert_eq!(difficulty, 2 * 96 * 96 * 96 * 3 * 1_000_000 / 432_000_000_000);
        assert_eq!(difficulty, 12);
    });
}

fn inference(uri: &[u8]) -> TaskKind {
    TaskKind::QuantizedInference {
        model: H256::repeat_byte(1),
        model_uri: BoundedVec::truncate_from(uri.to_vec()),
        dataset: H256::repeat_byte(2),
        dataset_uri: BoundedVec::truncate_from(b"http://data".to_vec()),
        widths: BoundedVec::truncate_from(vec![784, 128, 10]),
        samples: 10_000,
    }
}

#[test]
fn agreement_credits_every_executor_with_the_difficulty_and_records_its_speed() {
    new_test_ext().execute_with(|| {
        bond(1..=6);
        approved_publisher();
        let id = publish(chain(7), 3);
        let who = executors(id);
        assert_eq!(who.len(), 3);
        assert!(who.iter().all(|w| (1..=6).contains(w)));
        assert_eq!(task(id).phase, TaskPhase::Committing);
        let result = honest(id);
        let difficulty = task(id).difficulty;

        // Two commit in the next block, the third a block later; reveals open at once then.
        run_to_block(System::block_number() + 1);
        commit(id, who[0], result);
        commit(id, who[1], result);
        assert_eq!(task(id).phase, TaskPhase::Committing);
        run_to_block(System::block_number() + 1);
        commit(id, who[2], result);
        assert_eq!(task(id).phase, TaskPhase::Revealing);
        // Reveals that do not settle are refunded to a commitment's weight; the last one is not.
        for (i, w) in who.iter().enumerate() {
            let info =
                Drilling::reveal_result(RuntimeOrigin::signed(*w), id, result, salt(*w)).unwrap();
            let refunded = Some(<() as crate::WeightInfo>::commit_result());
            assert_eq!(info.actual_weight, if i + 1 < who.len() { refunded } else { None });
        }
        assert_eq!(task(id).phase, TaskPhase::Agreed { result });
        for w in &who {
            assert_eq!(drilling_credit(*w), difficulty);
        }
        // 1 block (6 s) and 2 blocks (12 s) from issuance to commitment.
        let record = Records::<Test>::get(who[0]).unwrap();
        assert_eq!((record.tasks, record.difficulty, record.busy_ms), (1, difficulty, 6_000));
        assert_eq!(record.micro_ut_per_hour(), difficulty * 3_600_000 / 6_000);
        assert_eq!(Records::<Test>::get(who[2]).unwrap().busy_ms, 12_000);
        assert_eq!(Drilling::hashrate(&who[2]).unwrap().1, difficulty * 3_600_000 / 12_000);
        assert_eq!(Drilling::hashrates(10)[0].0, who[0].min(who[1]));
        assert!(slashes().is_empty());
        assert!(Drilling::tasks_of(&who[0], 10).is_empty());

        // The record is removed after `Retention` blocks, freeing the publisher's slot.
        run_to_block(System::block_number() + 5);
        assert!(Tasks::<Test>::get(id).is_none());
        assert_eq!(PublishedTasks::<Test>::get(PUBLISHER), 0);
    });
}

#[test]
fn one_liar_of_three_is_slashed_nobody_is_credited_and_the_task_is_reissued_larger() {
    new_test_ext().execute_with(|| {
        bond(1..=12);
        approved_publisher();
        let id = publish(chain(3), 3);
        let who = executors(id);
        let result = honest(id);
        let lie = H256::repeat_byte(0xee);
        commit(id, who[0], result);
        commit(id, who[1], result);
        commit(id, who[2], lie);
        reveal(id, who[0], result);
        reveal(id, who[1], result);
        reveal(id, who[2], lie);
        let reissued = id + 1;
        assert_eq!(task(id).phase, TaskPhase::Disagreed { reissued: Some(reissued) });
        assert!(who.iter().all(|w| drilling_credit(*w) == 0));
        assert_eq!(slashes(), vec![(who[2], SlashReason::DrillingDisagreement)]);
        assert_eq!(TrainerStaking::active_bond(&who[2]), BOND - 100);

        // The re-issue: 5 executors, none of the previous attempt's honest pair.
        let again = task(reissued);
        assert_eq!((again.replication, again.attempt), (5, 1));
        assert_eq!(again.disputed.iter().map(|d| d.0).collect::<Vec<_>>(), who[..2].to_vec());
        run_to_block(System::block_number() + 1);
        let fresh = executors(reissued);
        assert_eq!(fresh.len(), 5);
        assert!(fresh.iter().all(|w| !who[..2].contains(w)));
        for w in &fresh {
            commit(reissued, *w, result);
        }
        for w in &fresh {
            reveal(reissued, *w, result);
        }
        assert!(matches!(task(reissued).phase, TaskPhase::Agreed { .. }));
        // The honest pair of the first attempt is not slashed, and not credited for it.
        assert_eq!(slashes().len(), 1);
        assert_eq!(drilling_credit(who[0]), 0);
        assert_eq!(drilling_credit(fresh[0]), task(reissued).difficulty);
    });
}

#[test]
fn a_split_pair_is_resolved_by_the_reissue_and_the_liar_slashed_then() {
    new_test_ext().execute_with(|| {
        bond(1..=10);
        approved_publisher();
        let id = publish(chain(5), 2);
        let who = executors(id);
        let result = honest(id);
        let lie = H256::repeat_byte(0x11);
        commit(id, who[0], result);
        commit(id, who[1], lie);
        reveal(id, who[0], result);
        reveal(id, who[1], lie);
        // No strict majority of 2: nobody can be blamed yet.
        assert!(slashes().is_empty());
        let reissued = id + 1;
        assert_eq!(task(reissued).replication, 4);
        run_to_block(System::block_number() + 1);
        let fresh = executors(reissued);
        assert!(fresh.iter().all(|w| !who.contains(w)));
        for w in &fresh {
            commit(reissued, *w, result);
        }
        for w in &fresh {
            reveal(reissued, *w, result);
        }
        assert_eq!(slashes(), vec![(who[1], SlashReason::DrillingDisagreement)]);
        assert_eq!(TrainerStaking::active_bond(&who[0]), BOND);
    });
}

#[test]
fn silent_executors_are_slashed_and_reissues_stop_at_the_limit() {
    new_test_ext().execute_with(|| {
        bond(1..=12);
        approved_publisher();
        let mut id = publish(chain(2), 2);
        for attempt in 0..=2u32 {
            assert_eq!(task(id).attempt, attempt);
            let who = executors(id);
            assert_eq!(who.len(), 2 + 2 * attempt as usize);
            System::reset_events();
            // Nobody commits: the commit window closes and the task settles.
            run_to_block(task(id).timeout);
            let mut slashed = slashes();
            slashed.sort_by_key(|s| s.0);
            let mut expected: Vec<_> = who.iter().map(|w| (*w, SlashReason::NoShow)).collect();
            expected.sort_by_key(|s| s.0);
            assert_eq!(slashed, expected);
            match task(id).phase {
                TaskPhase::Disagreed { reissued: Some(next) } => {
                    assert!(attempt < 2);
                    id = next;
                    run_to_block(System::block_number() + 1);
                }
                TaskPhase::Disagreed { reissued: None } => assert_eq!(attempt, 2),
                other => panic!("unexpected phase {other:?}"),
            }
        }
        assert!(Tasks::<Test>::iter().all(|(_, t)| t.phase.is_final()));
    });
}

#[test]
fn a_missing_commitment_opens_reveals_at_the_deadline_and_costs_the_silent_one() {
    new_test_ext().execute_with(|| {
        bond(1..=6);
        approved_publisher();
        let id = publish(chain(4), 3);
        let who = executors(id);
        let result = honest(id);
        commit(id, who[0], result);
        commit(id, who[1], result);
        run_to_block(task(id).timeout);
        assert_eq!(task(id).phase, TaskPhase::Revealing);
        // The late one can neither commit nor reveal now.
        assert_noop!(
            Drilling::commit_result(RuntimeOrigin::signed(who[2]), id, H256::zero()),
            Error::<Test>::NotInCommitPhase
        );
        assert_noop!(
            Drilling::reveal_result(RuntimeOrigin::signed(who[2]), id, result, salt(who[2])),
            Error::<Test>::NotCommitted
        );
        reveal(id, who[0], result);
        reveal(id, who[1], result);
        // Everyone who committed revealed: settled now, without credit (one was silent).
        assert!(matches!(task(id).phase, TaskPhase::Disagreed { reissued: Some(_) }));
        assert_eq!(slashes(), vec![(who[2], SlashReason::NoShow)]);
        assert_eq!(drilling_credit(who[0]), 0);
    });
}

#[test]
fn a_wrong_salt_is_refused_and_a_late_reveal_is_too_late() {
    new_test_ext().execute_with(|| {
        bond(1..=6);
        approved_publisher();
        let id = publish(chain(6), 2);
        let who = executors(id);
        let result = honest(id);
        commit(id, who[0], result);
        assert_noop!(
            Drilling::commit_result(RuntimeOrigin::signed(who[0]), id, H256::zero()),
            Error::<Test>::AlreadyCommitted
        );
        let outsider = (1..=6).find(|w| !who.contains(w)).unwrap();
        assert_noop!(
            Drilling::commit_result(RuntimeOrigin::signed(outsider), id, H256::zero()),
            Error::<Test>::NotAnExecutor
        );
        assert_noop!(
            Drilling::reveal_result(RuntimeOrigin::signed(who[0]), id, result, salt(who[0])),
            Error::<Test>::NotInRevealPhase
        );
        commit(id, who[1], result);
        assert_noop!(
            Drilling::reveal_result(RuntimeOrigin::signed(who[0]), id, result, H256::zero()),
            Error::<Test>::CommitmentMismatch
        );
        // Another executor's commitment cannot be reused: it binds the executor.
        assert_noop!(
            Drilling::reveal_result(RuntimeOrigin::signed(who[0]), id, result, salt(who[1])),
            Error::<Test>::CommitmentMismatch
        );
        reveal(id, who[0], result);
        assert_noop!(
            Drilling::reveal_result(RuntimeOrigin::signed(who[0]), id, result, salt(who[0])),
            Error::<Test>::AlreadyRevealed
        );
        // The second executor reveals after the window: too late, and it counts as silent.
        run_to_block(task(id).timeout);
        assert_noop!(
            Drilling::reveal_result(RuntimeOrigin::signed(who[1]), id, result, salt(who[1])),
            Error::<Test>::NotInRevealPhase
        );
        assert_eq!(slashes(), vec![(who[1], SlashReason::NoShow)]);
        assert_eq!(drilling_credit(who[0]), 0);
        assert_noop!(
            Drilling::commit_result(RuntimeOrigin::signed(who[0]), 999, H256::zero()),
            Error::<Test>::TaskNotFound
        );
    });
}

#[test]
fn agreeing_that_inference_inputs_are_unusable_earns_nothing_and_costs_nothing() {
    new_test_ext().execute_with(|| {
        bond(1..=4);
        approved_publisher();
        let kind = inference(b"http://model");
        let invalid = kind.invalid_result().unwrap();
        let id = publish(kind, 2);
        let who = executors(id);
        for w in &who {
            commit(id, *w, invalid);
        }
        for w in &who {
            reveal(id, *w, invalid);
        }
        assert_eq!(task(id).phase, TaskPhase::Invalid);
        assert!(who.iter().all(|w| drilling_credit(*w) == 0));
        assert!(slashes().is_empty());
        assert!(Records::<Test>::get(who[0]).is_none());
    });
}

#[test]
fn too_few_eligible_trainers_abandon_a_task() {
    new_test_ext().execute_with(|| {
        bond([1]);
        approved_publisher();
        let id = publish(chain(1), 2);
        assert_eq!(task(id).phase, TaskPhase::Abandoned);
        run_to_block(System::block_number() + 5);
        assert!(Tasks::<Test>::get(id).is_none());
    });
}

#[test]
fn executors_are_drawn_from_randomness_even_before_babe_has_any() {
    new_test_ext().execute_with(|| {
        RandomnessAvailable::set(false);
        bond(1..=4);
        approved_publisher();
        let id = publish(chain(1), 2);
        assert_eq!(executors(id).len(), 2);
    });
}

/// Tasks issued in an epoch, by executor.
fn synthetic_tasks_by_trainer(epoch: u32) -> std::collections::BTreeMap<u64, u32> {
    let mut count = std::collections::BTreeMap::new();
    for (_, t) in Tasks::<Test>::iter() {
        if t.origin == (TaskOrigin::Synthetic { epoch }) {
            for e in t.executors {
                *count.entry(e.who).or_insert(0) += 1;
            }
        }
    }
    count
}

#[test]
fn every_epoch_each_eligible_trainer_gets_exactly_one_synthetic_task_a_few_per_block() {
    new_test_ext().execute_with(|| {
        bond(1..=10);
        run_to_block(19);
        assert_eq!(Tasks::<Test>::count(), 0);
        run_to_block(20);
        System::assert_has_event(
            Event::<Test>::EpochStarted { epoch: 1, trainers: 10, tasks: 3 }.into(),
        );
        // At most `MaxIssuePerBlock` = 2 a block.
        assert_eq!(Tasks::<Test>::count(), 2);
        run_to_block(21);
        assert_eq!(Tasks::<Test>::count(), 3);
        assert!(Issuance::<Test>::get().is_none());
        let count = synthetic_tasks_by_trainer(1);
        assert_eq!(count.keys().copied().collect::<Vec<_>>(), (1..=10).collect::<Vec<_>>());
        assert!(count.values().all(|n| *n == 1));
        // Groups of 3, the last one takes the remainder.
        let mut sizes: Vec<_> = Tasks::<Test>::iter().map(|(_, t)| t.executors.len()).collect();
        sizes.sort();
        assert_eq!(sizes, vec![3, 3, 4]);
        // Each is the configured matrix chain, seeded differently, worth its exact work.
        let seeds: std::collections::BTreeSet<_> = Tasks::<Test>::iter()
            .map(|(_, t)| match t.kind {
                TaskKind::MatmulChain(c) => {
                    assert_eq!((c.dim, c.length), (64, 2));
                    assert_eq!(t.difficulty, c.difficulty_micro_ut());
                    c.seed
                }
                _ => panic!("synthetic tasks are matrix chains"),
            })
            .collect();
        assert_eq!(seeds.len(), 3);
    });
}

#[test]
fn synthetic_issuance_is_fair_over_epochs_and_waits_for_room() {
    new_test_ext().execute_with(|| {
        bond(1..=29);
        for epoch in 1..=3u32 {
            // Honest executors everywhere, so no one is slashed out of eligibility.
            let end = 20 * (epoch as u64 + 1) - 1;
            while System::block_number() < end {
                run_to_block(System::block_number() + 1);
                for (id, t) in Tasks::<Test>::iter().collect::<Vec<_>>() {
                    if t.phase == TaskPhase::Committing {
                        let result = honest(id);
                        for e in t.executors.iter().filter(|e| e.commitment.is_none()) {
                            commit(id, e.who, result);
                        }
                    } else if t.phase == TaskPhase::Revealing {
                        let result = honest(id);
                        for e in t.executors.iter().filter(|e| e.result.is_none()) {
                            reveal(id, e.who, result);
                        }
                    }
                }
                // `MaxOpenTasks` = 16 bounds storage; issuance resumes when records are removed.
                assert!(Tasks::<Test>::count() <= 16);
            }
            assert!(Issuance::<Test>::get().is_none(), "epoch {epoch} fully issued");
            assert_eq!(CurrentEpoch::<Test>::get(), epoch);
        }
        // Task records are removed 5 blocks after settling: count from the drilling records.
        for who in 1..=29u64 {
            assert_eq!(Records::<Test>::get(who).unwrap().tasks, 3, "trainer {who}");
        }
        assert!(slashes().is_empty());
    });
}

/// What an executor does with a task.
#[derive(Clone, Copy, Debug)]
enum Behaviour {
    Honest,
    /// Reveals one of two wrong results.
    Lie(u8),
    /// Commits but never reveals.
    CommitOnly,
    /// Does nothing.
    Silent,
}

fn behaviour() -> impl proptest::strategy::Strategy<Value = Behaviour> {
    use proptest::prelude::*;
    prop_oneof![
        3 => Just(Behaviour::Honest),
        1 => (0u8..2).prop_map(Behaviour::Lie),
        1 => Just(Behaviour::CommitOnly),
        1 => Just(Behaviour::Silent),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Whatever the executors do: credit only on unanimous agreement, exactly the silent and
    /// (under a strict majority) the minority slashed, a re-issue after every failure, the invariants
    /// after every block, and the task removed in the end.
    #[test]
    fn settlement_follows_the_rules(
        behaviours in proptest::collection::vec(behaviour(), 2..=7usize),
    ) {
        new_test_ext().execute_with(|| {
            bond(1..=20);
            approved_publisher();
            let r = behaviours.len();
            let id = publish(chain(9), r as u32);
            let who = executors(id);
            let result = honest(id);
            let answer = |b: Behaviour| match b {
                Behaviour::Lie(k) => H256::repeat_byte(0xa0 + k),
                _ => result,
            };
            for (w, b) in who.iter().zip(&behaviours) {
                if !matches!(b, Behaviour::Silent) {
                    commit(id, *w, answer(*b));
                }
            }
            run_to_block(System::block_number() + 1);
            if task(id).phase == TaskPhase::Committing {
                run_to_block(task(id).timeout);
            }
            for (w, b) in who.iter().zip(&behaviours) {
                if matches!(b, Behaviour::Honest | Behaviour::Lie(_)) {
                    reveal(id, *w, answer(*b));
                }
            }
            if task(id).phase == TaskPhase::Revealing {
                run_to_block(task(id).timeout);
            }

            let revealed: Vec<H256> = behaviours
                .iter()
                .filter(|b| matches!(b, Behaviour::Honest | Behaviour::Lie(_)))
                .map(|b| answer(*b))
                .collect();
            // Agreement is all r revealing the same bytes; executors who all return the same wrong
            // result are indistinguishable from honest ones (collusion is out of scope here).
            let unanimous = revealed.len() == r && revealed.iter().all(|x| *x == revealed[0]);
            let majority = crate::settlement::strict_majority(&revealed, r);
            let mut expected: Vec<(u64, SlashReason)> = Vec::new();
            for (w, b) in who.iter().zip(&behaviours) {
                match b {
                    Behaviour::Silent | Behaviour::CommitOnly => {
                        expected.push((*w, SlashReason::NoShow))
                    },
                    b if !unanimous && majority.is_some_and(|m| m != answer(*b)) => {
                        expected.push((*w, SlashReason::DrillingDisagreement))
                    },
                    _ => {},
                }
            }
            let mut slashed = slashes();
            slashed.sort_by_key(|s| s.0);
            expected.sort_by_key(|s| s.0);
            assert_eq!(slashed, expected, "{behaviours:?}");
            let difficulty = task(id).difficulty;
            for w in &who {
                assert_eq!(drilling_credit(*w), if unanimous { difficulty } else { 0 });
            }
            match task(id).phase {
                TaskPhase::Agreed { result: agreed } => {
                    assert!(unanimous);
                    assert_eq!(agreed, revealed[0]);
                },
                TaskPhase::Disagreed { reissued: Some(next) } => {
                    assert!(!unanimous);
                    assert_eq!(task(next).replication, (r as u32 + 2).min(7));
                },
                other => panic!("unexpected phase {other:?} for {behaviours:?}"),
            }
            // Everything ends and is removed (re-issues included, nobody answering them).
            run_to_block(System::block_number() + 60);
            assert_eq!(Tasks::<Test>::count(), 0);
            assert_eq!(PublishedTasks::<Test>::get(PUBLISHER), 0);
        });
    }
}
