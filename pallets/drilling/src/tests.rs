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
/// Declared capacity of the tests' drillers, micro-ut per hour: 25 micro-ut in half a window.
const CAPACITY: u128 = 10_000;

/// Bonds each of `trainers` and registers it as a driller of `CAPACITY`.
fn bond(trainers: impl IntoIterator<Item = u64>) {
    for who in trainers {
        assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(who), BOND));
        assert_ok!(Drilling::set_driller(RuntimeOrigin::signed(who), Some(CAPACITY)));
    }
}

/// Collateral `who` holds for task `id`.
fn collateral(who: u64, id: TaskId) -> u128 {
    <TrainerStaking as pallet_trainer_staking::Obligations<u64>>::collateral(
        &who,
        pallet_trainer_staking::Obligation::Drilling(id),
    )
}

/// Collateral `who` holds for all its duties.
fn obligated(who: u64) -> u128 {
    pallet_trainer_staking::Ledgers::<Test>::get(who).map_or(0, |l| l.obligated)
}

fn chain(seed: u8) -> TaskKind {
    TaskKind::MatmulChain(MatmulChain { seed: [seed; 32], dim: 96, length: 3 })
}

fn approved_publisher() {
    assert_ok!(Drilling::register_publisher(RuntimeOrigin::signed(PUBLISHER)));
    assert_ok!(Drilling::approve_publisher(RuntimeOrigin::root(), PUBLISHER));
}

/// Publishes `kind` for `r` executors and runs to the block that draws them (the mock's fresh
/// randomness began the block after publication and is read the block after that); returns the
/// task id.
fn publish(kind: TaskKind, r: u32) -> TaskId {
    let id = NextTaskId::<Test>::get();
    assert_ok!(Drilling::publish_task(RuntimeOrigin::signed(PUBLISHER), kind, r));
    run_to_block(System::block_number() + 2);
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

/// Every executor of every open task commits and reveals the honest result.
fn answer_open_tasks() {
    for (id, t) in Tasks::<Test>::iter().collect::<Vec<_>>() {
        if t.phase == TaskPhase::Committing {
            for e in t.executors.iter().filter(|e| e.commitment.is_none()) {
                commit(id, e.who, honest(id));
            }
        }
    }
    for (id, t) in Tasks::<Test>::iter().collect::<Vec<_>>() {
        if t.phase == TaskPhase::Revealing {
            for e in t.executors.iter().filter(|e| e.result.is_none()) {
                reveal(id, e.who, honest(id));
            }
        }
    }
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
            Drilling::set_driller(RuntimeOrigin::signed(7), Some(CAPACITY)),
            Error::<Test>::NotEligible
        );
        run_to_block(23);
        let count = synthetic_tasks_by_trainer(1);
        assert_eq!(count.keys().copied().collect::<Vec<_>>(), vec![1, 2, 3, 4]);
        // They answer their synthetic tasks (before the window closes), then a published one.
        answer_open_tasks();
        approved_publisher();
        let id = publish(chain(1), 4);
        let mut who = executors(id);
        who.sort();
        assert_eq!(who, vec![1, 2, 3, 4]);
        answer_open_tasks();

        // Stopping is always allowed; a driller whose bond fell below the minimum can be pruned by
        // anyone, an eligible one only by itself.
        assert_ok!(Drilling::set_driller(RuntimeOrigin::signed(4), None));
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
        // 18 micro-ut: within what the tests' drillers declare they do in half a window.
        samples: 40,
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
fn one_liar_of_three_is_judged_by_the_reissue_and_the_honest_pair_made_whole() {
    new_test_ext().execute_with(|| {
        bond(1..=12);
        approved_publisher();
        let id = publish(chain(3), 3);
        let who = executors(id);
        let result = honest(id);
        let stake = Drilling::collateral(task(id).difficulty);
        assert!(who.iter().all(|w| collateral(*w, id) == stake));
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
        // A 2 : 1 majority is not proof: nobody is slashed yet, every collateral stays frozen.
        assert!(slashes().is_empty());
        assert!(who.iter().all(|w| collateral(*w, id) == stake));

        // The re-issue: 5 executors, none of the first attempt's; all three results disputed.
        let again = task(reissued);
        assert_eq!((again.replication, again.attempt), (5, 1));
        let mut disputed: Vec<u64> = again.disputed.iter().map(|d| d.who).collect();
        disputed.sort();
        let mut first = who.clone();
        first.sort();
        assert_eq!(disputed, first);
        run_to_block(System::block_number() + 2);
        let fresh = executors(reissued);
        assert_eq!(fresh.len(), 5);
        assert!(fresh.iter().all(|w| !who.contains(w)));
        let before: Vec<u128> = who[..2].iter().map(Balances::free_balance).collect();
        for w in &fresh {
            commit(reissued, *w, result);
        }
        for w in &fresh {
            reveal(reissued, *w, result);
        }
        assert!(matches!(task(reissued).phase, TaskPhase::Agreed { .. }));
        // Now the liar is slashed its collateral, paid to the honest pair, who are also credited
        // the D they earned in the first attempt.
        assert_eq!(slashes(), vec![(who[2], SlashReason::DrillingDisagreement)]);
        assert_eq!(TrainerStaking::active_bond(&who[2]), BOND - stake);
        for (w, b) in who[..2].iter().zip(before) {
            assert_eq!(Balances::free_balance(w), b + stake / 2);
            assert_eq!(drilling_credit(*w), task(id).difficulty);
            assert_eq!(obligated(*w), 0);
        }
        assert_eq!(drilling_credit(fresh[0]), task(reissued).difficulty);
        assert!(fresh.iter().all(|w| obligated(*w) == 0));
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
        run_to_block(System::block_number() + 2);
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
        assert_eq!(obligated(who[0]), 0);
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
                    run_to_block(System::block_number() + 2);
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
fn executors_wait_for_fresh_randomness_and_a_task_without_any_is_abandoned() {
    new_test_ext().execute_with(|| {
        RandomnessAvailable::set(false);
        bond(1..=4);
        approved_publisher();
        let id = publish(chain(1), 2);
        // No fresh randomness: the task waits (no predictable fallback)...
        assert_eq!(task(id).phase, TaskPhase::Drawing);
        // ...and after an epoch without any it is abandoned with nothing held.
        run_to_block(System::block_number() + 20);
        assert_eq!(task(id).phase, TaskPhase::Abandoned);
        assert!((1..=4).all(|who| obligated(who) == 0));
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
        // The snapshot waits for randomness that began after it (mock: read at 22).
        run_to_block(21);
        assert_eq!(Tasks::<Test>::count(), 0);
        // At most `MaxIssuePerBlock` = 2 a block.
        run_to_block(22);
        assert_eq!(Tasks::<Test>::count(), 2);
        run_to_block(23);
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
                    // As many 64² products as half the window holds at the declared capacity.
                    let expected =
                        issuance::synthetic_chain(c.seed, 64, Drilling::window_work(CAPACITY));
                    assert_eq!((c.dim, c.length), (64, expected.length));
                    assert!(expected.length > 1);
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
            // Only silence is slashed on a first attempt: a majority is no proof against a minority.
            let mut expected: Vec<(u64, SlashReason)> = Vec::new();
            for (w, b) in who.iter().zip(&behaviours) {
                if matches!(b, Behaviour::Silent | Behaviour::CommitOnly) {
                    expected.push((*w, SlashReason::NoShow));
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
                    // Every revealed result waits for judgment with its collateral frozen.
                    assert_eq!(task(next).disputed.len(), revealed.len());
                    for (w, b) in who.iter().zip(&behaviours) {
                        let revealing = matches!(b, Behaviour::Honest | Behaviour::Lie(_));
                        assert_eq!(collateral(*w, id) > 0, revealing, "{behaviours:?}");
                    }
                },
                other => panic!("unexpected phase {other:?} for {behaviours:?}"),
            }
            // Everything ends and is removed (re-issues included, nobody answering them), and no
            // collateral stays frozen: unjudged disputes are released, never slashed.
            run_to_block(System::block_number() + 60);
            assert_eq!(Tasks::<Test>::count(), 0);
            assert_eq!(PublishedTasks::<Test>::get(PUBLISHER), 0);
            for w in 1..=20u64 {
                assert_eq!(obligated(w), 0, "{behaviours:?}");
            }
            let wrongly_slashed = slashes().into_iter().any(|(w, reason)| {
                reason == SlashReason::DrillingDisagreement
                    && who.iter().zip(&behaviours).any(|(x, b)| *x == w && matches!(b, Behaviour::Honest))
            });
            assert!(!wrongly_slashed, "an honest executor was slashed: {behaviours:?}");
        });
    }
}

/// The attacks on drilling from the economic-security review, played as the attacker would.
mod attacks {
    use super::*;
    use pallet_trainer_staking::Error as StakingError;

    /// The attacker learns the randomness of a draw first (it authors the last block whose VRF
    /// output it holds) and registers sybil drillers, or raises a sybil's capacity, to be drawn for a
    /// published task it wants to answer alone. Declarations made once the randomness began are not
    /// candidates.
    #[test]
    fn attack_drillers_declared_after_the_publication_are_never_drawn() {
        new_test_ext().execute_with(|| {
            bond(1..=4);
            approved_publisher();
            let id = NextTaskId::<Test>::get();
            assert_ok!(Drilling::publish_task(RuntimeOrigin::signed(PUBLISHER), chain(1), 2));
            // The randomness began: ten sybils declare, honest driller 4 re-declares.
            run_to_block(System::block_number() + 1);
            bond(10..=19);
            assert_ok!(Drilling::set_driller(RuntimeOrigin::signed(4), Some(CAPACITY)));
            run_to_block(System::block_number() + 1);
            let drawn = executors(id);
            assert_eq!(drawn.len(), 2);
            assert!(drawn.iter().all(|who| (1..=3).contains(who)), "drawn {drawn:?}");
        });
    }

    /// Knowing the randomness that orders an epoch's drillers, the attacker drops some of its
    /// sybils to shift the others into one group (which could then agree on a made-up result).
    /// The drillers were snapshotted before the randomness began and ordered by a race where each
    /// place depends on the driller's own key: leaving changes no group.
    #[test]
    fn attack_leaving_after_the_snapshot_does_not_regroup_the_epoch() {
        let groups = |leavers: &[u64]| {
            let mut ext = new_test_ext();
            ext.execute_with(|| {
                bond(1..=12);
                run_to_block(21);
                for who in leavers {
                    assert_ok!(Drilling::set_driller(RuntimeOrigin::signed(*who), None));
                }
                run_to_block(23);
                let mut groups: Vec<Vec<u64>> = Tasks::<Test>::iter()
                    .filter(|(_, t)| t.origin == TaskOrigin::Synthetic { epoch: 1 })
                    .map(|(_, t)| {
                        let mut g: Vec<u64> = t.executors.iter().map(|e| e.who).collect();
                        g.sort();
                        g
                    })
                    .collect();
                groups.sort();
                groups
            })
        };
        let honest = groups(&[]);
        assert_eq!(honest.len(), 4);
        assert_eq!(groups(&[2, 5, 7]), honest);
    }

    /// Drawn, the attacker unbonds everything it can and stays silent. Before obligations the slash
    /// was 1 % of an active bond it had just emptied: nothing. Now the task's collateral cannot be
    /// unbonded and is slashed whole.
    #[test]
    fn attack_unbonding_after_being_drawn_does_not_dodge_the_silence_slash() {
        new_test_ext().execute_with(|| {
            bond(1..=4);
            approved_publisher();
            let id = publish(chain(1), 2);
            let attacker = executors(id)[0];
            let stake = collateral(attacker, id);
            assert_eq!(stake, Drilling::collateral(task(id).difficulty));
            // It bonded more than the minimum: everything but the minimum can go, not the rest.
            assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(attacker), 2 * BOND));
            assert_noop!(
                TrainerStaking::unbond(RuntimeOrigin::signed(attacker), 3 * BOND),
                StakingError::<Test>::BondObligated
            );
            assert_ok!(TrainerStaking::unbond(RuntimeOrigin::signed(attacker), 2 * BOND));
            run_to_block(task(id).timeout);
            assert!(slashes().contains(&(attacker, SlashReason::NoShow)));
            assert_eq!(TrainerStaking::active_bond(&attacker), BOND - stake);
            assert_eq!(obligated(attacker), 0);
        });
    }

    /// One machine behind many accounts. Before, every driller got the same 2.5-ut task an hour
    /// whatever its hardware, so N accounts on one CPU earned N times its D. Now each account's task
    /// is as big as its declared capacity computes in half the commit window, all of an epoch's
    /// tasks share that window, and a capacity must be backed by free bond: N accounts must do N
    /// tasks' work in one window, and their D is exactly that work.
    #[test]
    fn attack_sybil_drillers_on_one_machine_earn_only_the_work_they_do_in_one_window() {
        new_test_ext().execute_with(|| {
            // Six sybils declare a tenth of the honest capacity each; six honest drillers.
            let sybil = CAPACITY / 10 * 4;
            for who in 1..=6 {
                assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(who), BOND));
                assert_ok!(Drilling::set_driller(RuntimeOrigin::signed(who), Some(sybil)));
            }
            bond(7..=12);
            run_to_block(23);
            let tasks: Vec<_> = Tasks::<Test>::iter().map(|(_, t)| t).collect();
            assert_eq!(tasks.len(), 4);
            for t in &tasks {
                let declared = t
                    .executors
                    .iter()
                    .map(|e| if e.who <= 6 { sybil } else { CAPACITY })
                    .min()
                    .unwrap();
                // Never more than the slowest member declared it does in half a window.
                assert!(t.difficulty <= Drilling::window_work(declared));
                // Everybody's task is due in the same window (issued over two blocks, 2 a block).
                assert!(t.timeout.abs_diff(tasks[0].timeout) <= 1);
            }
            // The bands keep capacities apart: the sybils' tasks are sized to what they declared.
            let work = |who: u64| {
                tasks
                    .iter()
                    .find(|t| t.executors.iter().any(|e| e.who == who))
                    .map(|t| t.difficulty)
                    .unwrap()
            };
            let sybils: u128 = (1..=6).map(work).sum();
            let honest: u128 = (7..=12).map(work).sum();
            assert!(sybils * 2 < honest, "sybils {sybils}, honest {honest}");
            assert!(sybils <= 6 * Drilling::window_work(sybil));

            // A capacity the free bond cannot back is refused, and so is one out of range.
            assert_ok!(TrainerStaking::bond(RuntimeOrigin::signed(13), BOND));
            // Half a window at 10⁶ micro-ut/hour is 2 500 micro-ut: 2 600 of collateral.
            let unbacked = 1_000_000;
            assert_noop!(
                Drilling::set_driller(RuntimeOrigin::signed(13), Some(unbacked)),
                Error::<Test>::CapacityNotBacked
            );
            assert_noop!(
                Drilling::set_driller(RuntimeOrigin::signed(13), Some(399)),
                Error::<Test>::CapacityOutOfRange
            );
        });
    }

    /// A publisher demands more work than any driller declared it can do in the window, to get
    /// honest drillers slashed for missing it. Before, executors were drawn regardless; now only
    /// drillers whose capacity covers the task are drawn, and with too few the task is abandoned
    /// without holding or slashing anyone.
    #[test]
    fn attack_a_published_task_bigger_than_the_executors_declared_draws_nobody() {
        new_test_ext().execute_with(|| {
            bond(1..=6);
            approved_publisher();
            let big = TaskKind::MatmulChain(MatmulChain { seed: [1; 32], dim: 128, length: 4 });
            assert!(big.difficulty().unwrap() > Drilling::window_work(CAPACITY));
            let id = publish(big.clone(), 2);
            assert_eq!(task(id).phase, TaskPhase::Abandoned);
            assert!(slashes().is_empty());
            assert!((1..=6).all(|w| obligated(w) == 0));
            // Two drillers declare enough: exactly they are drawn.
            for who in [5, 6] {
                assert_ok!(Drilling::set_driller(RuntimeOrigin::signed(who), Some(CAPACITY * 10)));
            }
            let id = publish(big, 2);
            let mut who = executors(id);
            who.sort();
            assert_eq!(who, vec![5, 6]);
            // Busy until their commit deadline: not drawn for a second task meanwhile.
            let small = publish(chain(2), 2);
            assert!(executors(small).iter().all(|w| ![5, 6].contains(w)));
        });
    }

    /// Two colluders reveal the same wrong result against one honest executor. Before, the strict
    /// majority slashed the honest one at once. Now nobody is judged until the re-issue confirms a
    /// result; the colluders lose their collateral to the honest executor, who is credited its D.
    #[test]
    fn attack_an_outvoted_honest_minority_is_not_slashed_and_is_made_whole() {
        new_test_ext().execute_with(|| {
            bond(1..=12);
            approved_publisher();
            let id = publish(chain(4), 3);
            let who = executors(id);
            let result = honest(id);
            let lie = H256::repeat_byte(0x66);
            let stake = collateral(who[0], id);
            let answers = [result, lie, lie];
            for (w, a) in who.iter().zip(answers) {
                commit(id, *w, a);
            }
            for (w, a) in who.iter().zip(answers) {
                reveal(id, *w, a);
            }
            assert!(slashes().is_empty());
            let reissued = id + 1;
            run_to_block(System::block_number() + 2);
            let before = Balances::free_balance(who[0]);
            for w in executors(reissued) {
                commit(reissued, w, result);
            }
            for w in executors(reissued) {
                reveal(reissued, w, result);
            }
            let mut slashed = slashes();
            slashed.sort_by_key(|s| s.0);
            let mut liars = vec![
                (who[1], SlashReason::DrillingDisagreement),
                (who[2], SlashReason::DrillingDisagreement),
            ];
            liars.sort_by_key(|s| s.0);
            assert_eq!(slashed, liars);
            assert_eq!(TrainerStaking::active_bond(&who[0]), BOND);
            assert_eq!(Balances::free_balance(who[0]), before + 2 * stake);
            assert_eq!(drilling_credit(who[0]), task(id).difficulty);
            System::assert_has_event(
                Event::<Test>::ExecutorVindicated {
                    task: id,
                    who: who[0],
                    difficulty: task(id).difficulty,
                }
                .into(),
            );
        });
    }

    /// On the last attempt a strict majority decides: the liars are slashed, the rest released.
    #[test]
    fn the_last_attempt_decides_by_strict_majority() {
        new_test_ext().execute_with(|| {
            bond(1..=20);
            approved_publisher();
            let mut id = publish(chain(6), 2);
            // Two silent attempts (their executors slashed for silence), then the last one.
            for _ in 0..2 {
                run_to_block(task(id).timeout);
                let TaskPhase::Disagreed { reissued: Some(next) } = task(id).phase else {
                    panic!("re-issued")
                };
                id = next;
                run_to_block(System::block_number() + 2);
            }
            assert_eq!(task(id).attempt, 2);
            let who = executors(id);
            let result = honest(id);
            let lie = H256::repeat_byte(0x77);
            System::reset_events();
            for (i, w) in who.iter().enumerate() {
                commit(id, *w, if i == 0 { lie } else { result });
            }
            for (i, w) in who.iter().enumerate() {
                reveal(id, *w, if i == 0 { lie } else { result });
            }
            assert_eq!(task(id).phase, TaskPhase::Disagreed { reissued: None });
            assert_eq!(slashes(), vec![(who[0], SlashReason::DrillingDisagreement)]);
            assert!(who.iter().all(|w| obligated(*w) == 0));
        });
    }

    /// Drilling records of accounts that stopped drilling are removed once stale; recent ones and
    /// those of active drillers are not.
    #[test]
    fn stale_drilling_records_are_pruned_by_anyone() {
        new_test_ext().execute_with(|| {
            bond(1..=3);
            approved_publisher();
            let id = publish(chain(8), 3);
            let result = honest(id);
            for w in executors(id) {
                commit(id, w, result);
            }
            for w in executors(id) {
                reveal(id, w, result);
            }
            assert!(Records::<Test>::contains_key(1));
            assert_noop!(
                Drilling::prune_record(RuntimeOrigin::signed(9), 4),
                Error::<Test>::NoRecord
            );
            assert_noop!(
                Drilling::prune_record(RuntimeOrigin::signed(9), 1),
                Error::<Test>::RecordNotStale
            );
            assert_ok!(Drilling::set_driller(RuntimeOrigin::signed(1), None));
            // `RecordRetention` = 2 epochs of 20 blocks.
            CurrentEpoch::<Test>::put(2);
            assert_noop!(
                Drilling::prune_record(RuntimeOrigin::signed(9), 1),
                Error::<Test>::RecordNotStale
            );
            CurrentEpoch::<Test>::put(3);
            assert_ok!(Drilling::prune_record(RuntimeOrigin::signed(9), 1));
            assert!(!Records::<Test>::contains_key(1));
            // Still a driller: kept.
            assert_noop!(
                Drilling::prune_record(RuntimeOrigin::signed(9), 2),
                Error::<Test>::RecordNotStale
            );
        });
    }

    #[test]
    fn capacity_bands_merge_below_the_minimum_size_and_groups_stay_within_bands() {
        use crate::issuance::{band, group_starts};
        // 7 in a high band, 2 in a middle band (merged down), 6 in a low band.
        let mut caps = vec![1u128 << 20; 7];
        caps.extend([1u128 << 15; 2]);
        caps.extend([1u128 << 10; 6]);
        assert!(band(caps[0]) > band(caps[7]) && band(caps[7]) > band(caps[9]));
        // Bands [0, 7) and [7, 15) (the middle pair joins the low band): groups of 3, last takes rest.
        assert_eq!(group_starts(&caps, 3, 2, 6), vec![0, 3, 7, 10]);
        // A lowest band too small is merged upwards.
        assert_eq!(group_starts(&caps[..9], 3, 2, 6), vec![0, 3, 6]);
        // Fewer than the minimum replication: no group.
        assert_eq!(group_starts(&caps[..1], 3, 2, 6), Vec::<u32>::new());
    }
}
