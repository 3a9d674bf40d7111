//! Tests of bonds, slashing, offences, authority selection and rewards.

use crate::{
    mock::*, BondInspect, Error, Event, HoldReason, Ledgers, Obligation, Obligations, SlashReason,
    Slashing, SuspendedUntil,
};
use frame_support::{
    assert_noop, assert_ok,
    traits::{
        fungible::{Balanced, Inspect, InspectHold},
        OnUnbalanced,
    },
};
use pallet_compute_power::{ComputePowerLedger, WorkKind};
use pallet_session::SessionManager;
use sp_runtime::Perbill;
use sp_staking::offence::{OffenceDetails, OnOffenceHandler};

fn origin(who: u64) -> RuntimeOrigin {
    RuntimeOrigin::signed(who)
}

fn held(who: u64) -> u128 {
    Balances::balance_on_hold(&RuntimeHoldReason::TrainerStaking(HoldReason::Bonded), &who)
}

fn last_event() -> RuntimeEvent {
    System::events().pop().expect("an event").event
}

/// Runs `test` and then checks the pallet's invariant (held == ledger totals == TotalBonded).
fn run(test: impl FnOnce()) {
    new_test_ext().execute_with(|| {
        test();
        TrainerStaking::do_try_state().expect("invariant holds");
    })
}

fn go_to_block(n: u64) {
    System::set_block_number(n);
}

#[test]
fn bond_holds_balance_and_enforces_the_minimum() {
    run(|| {
        assert_noop!(TrainerStaking::bond(origin(1), 0), Error::<Test>::ZeroAmount);
        assert_noop!(TrainerStaking::bond(origin(1), 99), Error::<Test>::BelowMinimumBond);
        assert_noop!(TrainerStaking::bond(origin(1), 10_000), Error::<Test>::InsufficientBalance);
        assert_ok!(TrainerStaking::bond(origin(1), 100));
        assert_eq!(last_event(), Event::Bonded { who: 1, amount: 100 }.into());
        // Once the minimum is reached, any top-up is accepted.
        assert_ok!(TrainerStaking::bond(origin(1), 1));
        assert_eq!((held(1), Balances::balance(&1)), (101, 10_000 - 101));
        assert!(TrainerStaking::is_eligible(&1));
        assert!(!TrainerStaking::is_eligible(&2));
    });
}

#[test]
fn the_number_of_bonders_is_bounded() {
    run(|| {
        for who in 1..=5 {
            assert_ok!(TrainerStaking::bond(origin(who), 100));
        }
        assert_noop!(TrainerStaking::bond(origin(6), 100), Error::<Test>::TooManyBonders);
        // Topping up an existing bond is still fine.
        assert_ok!(TrainerStaking::bond(origin(5), 100));
    });
}

#[test]
fn unbond_edge_cases() {
    run(|| {
        assert_noop!(TrainerStaking::unbond(origin(1), 10), Error::<Test>::NotBonded);
        assert_ok!(TrainerStaking::bond(origin(1), 500));
        assert_noop!(TrainerStaking::unbond(origin(1), 0), Error::<Test>::ZeroAmount);
        assert_noop!(TrainerStaking::unbond(origin(1), 501), Error::<Test>::InsufficientBond);
        // 500 - 401 = 99 would stay active: below the minimum, neither zero.
        assert_noop!(TrainerStaking::unbond(origin(1), 401), Error::<Test>::BelowMinimumBond);
        assert_ok!(TrainerStaking::unbond(origin(1), 100));
        assert_eq!(last_event(), Event::Unbonded { who: 1, amount: 100, unlocks_at: 11 }.into());
        go_to_block(2);
        assert_ok!(TrainerStaking::unbond(origin(1), 100));
        go_to_block(3);
        assert_ok!(TrainerStaking::unbond(origin(1), 100));
        go_to_block(4);
        assert_noop!(TrainerStaking::unbond(origin(1), 100), Error::<Test>::TooManyUnlockingChunks);
        // Unbonding stays held (and slashable) and no longer counts as active.
        assert_eq!((held(1), TrainerStaking::active_bond(&1)), (500, 200));
    });
}

#[test]
fn withdraw_only_after_the_unbonding_period_and_only_once() {
    run(|| {
        assert_ok!(TrainerStaking::bond(origin(1), 500));
        assert_ok!(TrainerStaking::unbond(origin(1), 500));
        assert!(!TrainerStaking::is_eligible(&1));
        go_to_block(10);
        assert_noop!(
            TrainerStaking::withdraw_unbonded(origin(1)),
            Error::<Test>::NothingToWithdraw
        );
        go_to_block(11);
        assert_ok!(TrainerStaking::withdraw_unbonded(origin(1)));
        assert_eq!(last_event(), Event::Withdrawn { who: 1, amount: 500 }.into());
        assert_eq!((held(1), Balances::balance(&1)), (0, 10_000));
        assert!(Ledgers::<Test>::get(1).is_none());
        assert_noop!(TrainerStaking::withdraw_unbonded(origin(1)), Error::<Test>::NotBonded);
    });
}

#[test]
fn partial_withdraw_then_double_withdraw_is_refused() {
    run(|| {
        assert_ok!(TrainerStaking::bond(origin(1), 500));
        assert_ok!(TrainerStaking::unbond(origin(1), 100));
        go_to_block(5);
        assert_ok!(TrainerStaking::unbond(origin(1), 100));
        go_to_block(11);
        assert_ok!(TrainerStaking::withdraw_unbonded(origin(1)));
        assert_noop!(
            TrainerStaking::withdraw_unbonded(origin(1)),
            Error::<Test>::NothingToWithdraw
        );
        assert_eq!((held(1), TrainerStaking::active_bond(&1)), (400, 300));
        go_to_block(15);
        assert_ok!(TrainerStaking::withdraw_unbonded(origin(1)));
        assert_eq!(held(1), 300);
    });
}

#[test]
fn rebond_takes_back_unbonding_stake() {
    run(|| {
        assert_ok!(TrainerStaking::bond(origin(1), 500));
        assert_noop!(TrainerStaking::rebond(origin(1), 10), Error::<Test>::NothingToRebond);
        assert_ok!(TrainerStaking::unbond(origin(1), 500));
        // Rebonding 50 would leave an active bond of 50: below the minimum.
        assert_noop!(TrainerStaking::rebond(origin(1), 50), Error::<Test>::BelowMinimumBond);
        assert_ok!(TrainerStaking::rebond(origin(1), 1_000));
        assert_eq!(last_event(), Event::Rebonded { who: 1, amount: 500 }.into());
        assert_eq!((TrainerStaking::active_bond(&1), held(1)), (500, 500));
        go_to_block(20);
        assert_noop!(
            TrainerStaking::withdraw_unbonded(origin(1)),
            Error::<Test>::NothingToWithdraw
        );
    });
}

#[test]
fn slash_larger_than_the_bond_takes_only_the_bond_and_pays_the_treasury() {
    run(|| {
        assert_ok!(TrainerStaking::bond(origin(1), 300));
        let issuance = Balances::total_issuance();
        let slashed = TrainerStaking::slash(&1, 1_000_000, SlashReason::FailedProofOfTraining);
        assert_eq!(slashed, 300);
        assert_eq!(
            last_event(),
            Event::Slashed { who: 1, amount: 300, reason: SlashReason::FailedProofOfTraining }
                .into()
        );
        assert_eq!((held(1), Balances::balance(&1)), (0, 9_700));
        assert_eq!(Balances::balance(&TREASURY), 301);
        assert_eq!(Balances::total_issuance(), issuance);
        assert!(Ledgers::<Test>::get(1).is_none());
        // Nothing left: a second slash takes nothing and emits nothing.
        let events = System::events().len();
        assert_eq!(TrainerStaking::slash(&1, 10, SlashReason::NoShow), 0);
        assert_eq!(System::events().len(), events);
    });
}

#[test]
fn slash_during_unbonding_reaches_the_unlocking_chunks() {
    run(|| {
        assert_ok!(TrainerStaking::bond(origin(1), 500));
        assert_ok!(TrainerStaking::unbond(origin(1), 400));
        assert_eq!(TrainerStaking::slash(&1, 250, SlashReason::DrillingDisagreement), 250);
        // 100 active went first, then 150 of the unbonding 400.
        assert_eq!((TrainerStaking::active_bond(&1), held(1)), (0, 250));
        go_to_block(11);
        assert_ok!(TrainerStaking::withdraw_unbonded(origin(1)));
        assert_eq!(last_event(), Event::Withdrawn { who: 1, amount: 250 }.into());
        assert_eq!(Balances::balance(&1), 10_000 - 250);
    });
}

#[test]
fn authorities_are_eligible_registered_trainers_by_seat_score_capped() {
    run(|| {
        for who in 1..=5 {
            assert_ok!(TrainerStaking::bond(origin(who), 100 * who as u128));
        }
        // ECP (micro-ut): 1 → 600, 2 → 5 400, 3 → 600, 4 → 4 000, 5 → 0 (below the seat floor).
        ComputePower::credit(&1, WorkKind::Training, 1_000);
        ComputePower::credit(&2, WorkKind::Training, 9_000);
        ComputePower::credit(&3, WorkKind::Training, 1_000);
        ComputePower::credit(&4, WorkKind::Drilling, 10_000);
        Registered::set(vec![1, 2, 3, 4, 5]);
        // √(bond · ECP): 4 → 1 264, 2 → 1 039, 3 → 424, 1 → 244; cut at 3.
        assert_eq!(TrainerStaking::select_authorities(1), vec![4, 2, 3]);
        // Without session keys, 2 is skipped; below the minimum bond (slashed), 4 is skipped; 5 has
        // no work and no seat whatever its bond.
        Registered::set(vec![1, 3, 4, 5]);
        TrainerStaking::slash(&4, 350, SlashReason::NoShow);
        assert_eq!(TrainerStaking::select_authorities(1), vec![3, 1]);
        assert_eq!(<TrainerStaking as SessionManager<u64>>::new_session(1), Some(vec![3, 1]));
        assert_eq!(last_event(), Event::AuthoritiesSelected { session: 1, authorities: 2 }.into());
    });
}

/// The attack (issue 34, item 4): bond under several accounts that never did any work and take
/// the seats. Without ECP they get none, whatever they bond; with the least ECP a seat takes, a large
/// bond still ranks below validators with both.
#[test]
fn attack_bonded_sybils_without_work_get_no_seat() {
    run(|| {
        for honest in [1, 2] {
            assert_ok!(TrainerStaking::bond(origin(honest), 1_000));
            ComputePower::credit(&honest, WorkKind::Training, 10_000);
        }
        for sybil in [3, 4, 5] {
            assert_ok!(TrainerStaking::bond(origin(sybil), 9_000));
        }
        Registered::set(vec![1, 2, 3, 4, 5]);
        assert_eq!(TrainerStaking::select_authorities(1), vec![1, 2]);
        // One sybil does the least work a seat takes (ECP 0.4 · 250 = 100): √(9 000 · 100) = 948
        // against √(1 000 · 6 000) = 2 449: it takes the last seat only because one is free.
        ComputePower::credit(&3, WorkKind::Drilling, 250);
        assert_eq!(TrainerStaking::select_authorities(1), vec![1, 2, 3]);
        assert!(crate::seat_score(9_000, 100) < crate::seat_score(1_000, 6_000));
    });
}

#[test]
fn no_candidate_keeps_the_current_set() {
    run(|| {
        assert_eq!(<TrainerStaking as SessionManager<u64>>::new_session(1), None);
        // Bonded but without keys: still nobody.
        assert_ok!(TrainerStaking::bond(origin(1), 100));
        assert_eq!(<TrainerStaking as SessionManager<u64>>::new_session(1), None);
        // With keys but no work: nobody either.
        Registered::set(vec![1]);
        assert_eq!(<TrainerStaking as SessionManager<u64>>::new_session(1), None);
        ComputePower::credit(&1, WorkKind::Training, MIN_AUTHORITY_ECP * 2);
        assert_eq!(<TrainerStaking as SessionManager<u64>>::new_session(1), Some(vec![1]));
    });
}

/// An offence as pallet-im-online reports it: `offenders` missed session `session` of a set of
/// `validators`, with im-online's own fraction (0 while at most a tenth are offline).
struct Unresponsive {
    session: u32,
    validators: u32,
    offenders: Vec<(u64, ())>,
}

impl sp_staking::offence::Offence<(u64, ())> for Unresponsive {
    const ID: sp_staking::offence::Kind = *b"im-online:offlin";
    type Slot = u32;
    fn offenders(&self) -> Vec<(u64, ())> {
        self.offenders.clone()
    }
    fn session_index(&self) -> u32 {
        self.session
    }
    fn validator_set_count(&self) -> u32 {
        self.validators
    }
    fn slot(&self) -> u32 {
        self.session
    }
    fn slash_fraction(&self, _offenders: u32) -> Perbill {
        Perbill::zero()
    }
}

/// The attack (issue 34, item 4): hold a seat and never validate, so the honest supermajority is out
/// of reach. The session it missed costs the floor fraction of its bond, and the seat.
#[test]
fn attack_an_unresponsive_validator_is_slashed_and_loses_its_seat() {
    use sp_staking::offence::ReportOffence;
    run(|| {
        for who in [1, 2] {
            assert_ok!(TrainerStaking::bond(origin(who), 1_000));
            ComputePower::credit(&who, WorkKind::Training, 10_000);
        }
        Registered::set(vec![1, 2]);
        <TrainerStaking as SessionManager<u64>>::start_session(4);
        let offence = Unresponsive { session: 4, validators: 2, offenders: vec![(2, ())] };
        assert_ok!(<crate::ReportUnresponsive<Test> as ReportOffence<_, _, _>>::report_offence(
            vec![],
            offence
        ));
        // im-online's 0 is raised to the 1 % floor.
        assert_eq!(held(2), 990);
        assert!(System::events().iter().any(|r| r.event
            == Event::Slashed { who: 2, amount: 10, reason: SlashReason::Unresponsive }.into()));
        assert_eq!(last_event(), Event::Suspended { who: 2, until: 8 }.into());
        // Out of the sets planned for sessions 5–7, back from 8; suspended in the session it was
        // already queued for (the runtime weighs it at the minimum there).
        for session in 5..8 {
            assert_eq!(TrainerStaking::select_authorities(session), vec![1]);
        }
        assert_eq!(TrainerStaking::select_authorities(8), vec![1, 2]);
        <TrainerStaking as SessionManager<u64>>::start_session(5);
        assert!(TrainerStaking::is_suspended(&2));
        assert!(!TrainerStaking::is_suspended(&1));
        // A later, shorter suspension never shortens a longer one.
        SuspendedUntil::<Test>::insert(2, 100);
        TrainerStaking::punish_unresponsive(&2, Perbill::from_percent(1));
        assert_eq!(SuspendedUntil::<Test>::get(2), Some(100));
    });
}

/// A new network's validators come up one by one: whoever missed the genesis session is neither
/// slashed nor suspended (the first session after it is judged).
#[test]
fn the_genesis_session_is_not_judged() {
    use sp_staking::offence::ReportOffence;
    run(|| {
        for who in [1, 2] {
            assert_ok!(TrainerStaking::bond(origin(who), 1_000));
            ComputePower::credit(&who, WorkKind::Training, 10_000);
        }
        Registered::set(vec![1, 2]);
        let report = |session| {
            let offence = Unresponsive { session, validators: 2, offenders: vec![(2, ())] };
            <crate::ReportUnresponsive<Test> as ReportOffence<_, _, _>>::report_offence(
                vec![],
                offence,
            )
        };
        assert_ok!(report(0));
        assert_eq!(held(2), 1_000);
        assert_eq!(SuspendedUntil::<Test>::get(2), None);
        assert_eq!(TrainerStaking::select_authorities(2), vec![1, 2]);
        <TrainerStaking as SessionManager<u64>>::start_session(1);
        assert_ok!(report(1));
        assert_eq!(held(2), 990);
        assert!(SuspendedUntil::<Test>::get(2).is_some());
    });
}

fn offence(who: u64) -> OffenceDetails<u64, (u64, ())> {
    OffenceDetails { offender: (who, ()), reporters: vec![] }
}

#[test]
fn equivocation_slashes_suspends_and_is_not_applied_twice() {
    run(|| {
        assert_ok!(TrainerStaking::bond(origin(1), 1_000));
        assert_ok!(TrainerStaking::bond(origin(2), 1_000));
        ComputePower::credit(&1, WorkKind::Training, 1_000);
        ComputePower::credit(&2, WorkKind::Training, 1_000);
        Registered::set(vec![1, 2]);
        <TrainerStaking as SessionManager<u64>>::start_session(3);
        // pallet-offences computed 1%: the floor of 10% applies.
        TrainerStaking::on_offence(&[offence(1)], &[Perbill::from_percent(1)], 3);
        assert!(System::events().iter().any(|r| r.event
            == Event::Slashed { who: 1, amount: 100, reason: SlashReason::Equivocation }.into()));
        assert_eq!(last_event(), Event::Suspended { who: 1, until: 6 }.into());
        // The same offence again (pallet-offences repeats earlier offenders): nothing more.
        TrainerStaking::on_offence(&[offence(1)], &[Perbill::from_percent(10)], 3);
        assert_eq!(held(1), 900);
        // A larger fraction for the same session slashes the difference of the bond at the first
        // report (30% − 10% of 1 000), not of the bond the first slash shrank (it was 180 of 900).
        TrainerStaking::on_offence(&[offence(1)], &[Perbill::from_percent(30)], 3);
        assert_eq!(held(1), 700);
        // Disabled at once, each time the fraction grew.
        assert_eq!(Disabled::get(), vec![1, 1]);
        // Suspended for the next 2 sessions (4 and 5), back for session 6.
        assert_eq!(TrainerStaking::select_authorities(4), vec![2]);
        assert_eq!(TrainerStaking::select_authorities(5), vec![2]);
        // Back, behind 2: the slashes cost it rank too (bond 700 against 1 000, the same ECP).
        assert_eq!(TrainerStaking::select_authorities(6), vec![2, 1]);
        // The suspension record is pruned when the session it ends at starts.
        <TrainerStaking as SessionManager<u64>>::start_session(5);
        assert!(SuspendedUntil::<Test>::get(1).is_some());
        <TrainerStaking as SessionManager<u64>>::start_session(6);
        assert!(SuspendedUntil::<Test>::get(1).is_none());
    });
}

/// The attack on commit 89b1f7a: take a duty, `unbond(all)` so that a slash of "a share of the
/// active bond" is zero, then `rebond`. With obligations the duty's collateral stays bonded and the
/// slash is a share of it.
#[test]
fn attack_unbonding_after_taking_a_duty_does_not_dodge_its_slash() {
    run(|| {
        assert_ok!(TrainerStaking::bond(origin(1), 1_000));
        let duty = Obligation::Training(7);
        assert_ok!(TrainerStaking::obligate(&1, duty, 400));
        // The attacker tries to unbond everything, then everything but the minimum.
        assert_noop!(TrainerStaking::unbond(origin(1), 1_000), Error::<Test>::BondObligated);
        assert_noop!(TrainerStaking::unbond(origin(1), 601), Error::<Test>::BondObligated);
        assert_ok!(TrainerStaking::unbond(origin(1), 600));
        // The job market slashes all of the collateral for the missed deadline.
        let slashed =
            TrainerStaking::slash_obligation(&1, duty, Perbill::one(), SlashReason::NoShow);
        assert_eq!(slashed, 400);
        assert_eq!(held(1), 600);
        assert_eq!(TrainerStaking::collateral(&1, duty), 0);
        assert_eq!(Ledgers::<Test>::get(1).unwrap().obligated, 0);
    });
}

/// A compensating slash pays the wronged account what the failed duty cost it, up to the slash;
/// the rest goes where every slash goes (the mock's treasury). A cost beyond the slash gets the
/// slash whole.
#[test]
fn a_compensating_slash_pays_the_wronged_first_and_the_rest_goes_where_slashes_go() {
    run(|| {
        assert_ok!(TrainerStaking::bond(origin(1), 1_000));
        let duties = [(Obligation::Training(1), 150, 150), (Obligation::Training(2), 900, 400)];
        for (duty, cost, paid) in duties {
            assert_ok!(TrainerStaking::obligate(&1, duty, 400));
            let (wronged, treasury) = (Balances::balance(&2), Balances::balance(&TREASURY));
            let slashed = TrainerStaking::slash_obligation_compensating(
                &1,
                duty,
                Perbill::one(),
                SlashReason::FailedProofOfTraining,
                &2,
                cost,
            );
            assert_eq!(slashed, 400);
            assert_eq!(Balances::balance(&2), wronged + paid);
            assert_eq!(Balances::balance(&TREASURY), treasury + (400 - paid));
            assert_eq!(TrainerStaking::collateral(&1, duty), 0);
        }
        assert_eq!(held(1), 200);
    });
}

#[test]
fn obligations_are_bounded_by_the_free_bond_and_their_number() {
    run(|| {
        assert_ok!(TrainerStaking::bond(origin(1), 1_000));
        assert_ok!(TrainerStaking::obligate(&1, Obligation::Drilling(1), 300));
        assert_noop!(
            TrainerStaking::obligate(&1, Obligation::Drilling(1), 1),
            Error::<Test>::AlreadyObligated
        );
        assert_noop!(
            TrainerStaking::obligate(&1, Obligation::Drilling(2), 701),
            Error::<Test>::InsufficientCollateral
        );
        assert_eq!(TrainerStaking::free_collateral(&1), 700);
        assert_ok!(TrainerStaking::obligate(&1, Obligation::Drilling(2), 100));
        assert_ok!(TrainerStaking::obligate(
            &1,
            Obligation::Verification { job: 1, round: 0 },
            100
        ));
        // MaxObligations = 3.
        assert_noop!(
            TrainerStaking::obligate(&1, Obligation::Drilling(3), 1),
            Error::<Test>::TooManyObligations
        );
        assert_eq!(TrainerStaking::release(&1, Obligation::Drilling(1)), 300);
        assert_eq!(TrainerStaking::release(&1, Obligation::Drilling(1)), 0);
        assert_eq!(TrainerStaking::free_collateral(&1), 800);
        assert_noop!(
            TrainerStaking::obligate(&2, Obligation::Drilling(1), 1),
            Error::<Test>::NotBonded
        );
    });
}

#[test]
fn a_share_of_the_collateral_is_slashed_and_the_rest_released() {
    run(|| {
        assert_ok!(TrainerStaking::bond(origin(1), 1_000));
        let duty = Obligation::Verification { job: 3, round: 1 };
        assert_ok!(TrainerStaking::obligate(&1, duty, 200));
        assert_eq!(
            TrainerStaking::slash_obligation(
                &1,
                duty,
                Perbill::from_percent(10),
                SlashReason::NoShow
            ),
            20
        );
        assert_eq!((held(1), TrainerStaking::free_collateral(&1)), (980, 980));
        // No obligation, no slash.
        assert_eq!(
            TrainerStaking::slash_obligation(&1, duty, Perbill::one(), SlashReason::NoShow),
            0
        );
    });
}

#[test]
fn an_equivocation_slash_beyond_the_free_bond_shrinks_the_obligations() {
    run(|| {
        assert_ok!(TrainerStaking::bond(origin(1), 1_000));
        assert_ok!(TrainerStaking::obligate(&1, Obligation::Training(1), 800));
        assert_ok!(TrainerStaking::unbond(origin(1), 100));
        // 100 free, 100 unlocking, then 300 of the obligated 800.
        assert_eq!(TrainerStaking::slash(&1, 500, SlashReason::Equivocation), 500);
        assert_eq!(TrainerStaking::collateral(&1, Obligation::Training(1)), 500);
        assert_eq!(Ledgers::<Test>::get(1).unwrap().obligated, 500);
        // A slash of everything leaves an empty ledger that is kept while the obligation is open.
        assert_eq!(TrainerStaking::slash(&1, 10_000, SlashReason::Equivocation), 500);
        assert!(Ledgers::<Test>::get(1).is_some());
        assert_eq!(TrainerStaking::release(&1, Obligation::Training(1)), 0);
    });
}

#[test]
fn offences_older_than_the_history_depth_are_ignored() {
    run(|| {
        assert_ok!(TrainerStaking::bond(origin(1), 1_000));
        <TrainerStaking as SessionManager<u64>>::start_session(10);
        TrainerStaking::on_offence(&[offence(1)], &[Perbill::from_percent(50)], 5);
        assert_eq!(held(1), 1_000);
        TrainerStaking::on_offence(&[offence(1)], &[Perbill::from_percent(50)], 6);
        assert_eq!(held(1), 500);
    });
}

#[test]
fn the_author_is_minted_the_block_reward() {
    run(|| {
        let issuance = Balances::total_issuance();
        <TrainerStaking as pallet_authorship::EventHandler<u64, u64>>::note_author(3);
        assert_eq!(last_event(), Event::BlockRewarded { author: 3, amount: 7 }.into());
        assert_eq!(Balances::balance(&3), 10_007);
        assert_eq!(Balances::total_issuance(), issuance + 7);
    });
}

#[test]
fn block_reward_through_pallet_authorship() {
    run(|| {
        Author::set(Some(4));
        use frame_support::traits::Hooks;
        Authorship::on_initialize(1);
        assert_eq!(Balances::balance(&4), 10_007);
    });
}

#[test]
fn fees_go_to_the_author_or_are_burnt() {
    run(|| {
        let issuance = Balances::total_issuance();
        // No author known (pallet-authorship caches the author per block, so this case goes first):
        // the fee is dropped, which burns it.
        let fee = Balances::issue(30);
        assert_eq!(Balances::total_issuance(), issuance + 30);
        crate::rewards::FeesToAuthor::<Test>::on_unbalanced(fee);
        assert_eq!(Balances::total_issuance(), issuance);

        Author::set(Some(2));
        let fee = Balances::withdraw(
            &5,
            50,
            frame_support::traits::tokens::Precision::Exact,
            frame_support::traits::tokens::Preservation::Preserve,
            frame_support::traits::tokens::Fortitude::Polite,
        )
        .unwrap();
        crate::rewards::FeesToAuthor::<Test>::on_unbalanced(fee);
        assert_eq!((Balances::balance(&5), Balances::balance(&2)), (9_950, 10_050));
        assert_eq!(Balances::total_issuance(), issuance);
    });
}

#[test]
fn genesis_stakers_are_bonded() {
    use sp_runtime::BuildStorage;
    let mut storage = frame_system::GenesisConfig::<Test>::default().build_storage().unwrap();
    pallet_balances::GenesisConfig::<Test> { balances: vec![(1, 1_000)], ..Default::default() }
        .assimilate_storage(&mut storage)
        .unwrap();
    crate::GenesisConfig::<Test> { stakers: vec![(1, 400)] }
        .assimilate_storage(&mut storage)
        .unwrap();
    sp_io::TestExternalities::new(storage).execute_with(|| {
        assert_eq!((held(1), TrainerStaking::active_bond(&1)), (400, 400));
        TrainerStaking::do_try_state().unwrap();
    });
}
