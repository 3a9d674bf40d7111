use crate::{mock::*, ComputePowerLedger, Credits, Error, Event, TotalLifetime, WorkKind};
use frame_support::{assert_noop, assert_ok};

#[test]
fn the_network_total_follows_credits_and_their_decay() {
    new_test_ext(vec![]).execute_with(|| {
        ComputePower::credit(&1, WorkKind::Drilling, 1_000_000);
        ComputePower::credit(&2, WorkKind::Training, 2_000_000);
        assert_eq!(ComputePower::total_ecp(), 400_000 + 1_200_000);
        System::set_block_number(System::block_number() + 100);
        // One half-life later both halve, and the total with them.
        assert_eq!(ComputePower::total_ecp(), 800_000);
        assert_eq!(ComputePower::ecp(&1) + ComputePower::ecp(&2), 800_000);
    });
}

#[test]
fn a_record_decayed_to_zero_is_pruned_by_anyone_and_a_live_one_is_not() {
    new_test_ext(vec![]).execute_with(|| {
        ComputePower::credit(&1, WorkKind::Training, 1_000);
        assert_noop!(
            ComputePower::prune_credit(RuntimeOrigin::signed(9), 1),
            Error::<Test>::NothingToPrune
        );
        // 1 000 halves to 0 within 10 half-lives.
        System::set_block_number(System::block_number() + 1_100);
        assert_ok!(ComputePower::prune_credit(RuntimeOrigin::signed(9), 1));
        assert!(Credits::<Test>::get(1).is_none());
        assert_eq!(TotalLifetime::<Test>::get(), 1_000);
        assert_noop!(
            ComputePower::prune_credit(RuntimeOrigin::signed(9), 1),
            Error::<Test>::NothingToPrune
        );
    });
}

#[test]
fn ecp_is_point_four_d_plus_point_six_t() {
    new_test_ext(vec![]).execute_with(|| {
        ComputePower::credit(&1, WorkKind::Drilling, 1_000);
        ComputePower::credit(&1, WorkKind::Training, 2_000);
        assert_eq!(ComputePower::ecp(&1), 400 + 1_200);
        let p = ComputePower::compute_power(&1);
        assert_eq!((p.drilling, p.training, p.lifetime), (1_000, 2_000, 3_000));
        System::assert_last_event(
            Event::Credited { who: 1, kind: WorkKind::Training, amount: 2_000, ecp: 1_600 }.into(),
        );
        assert_eq!(ComputePower::ecp(&2), 0, "unknown trainers have no power");
    });
}

#[test]
fn credit_decays_lazily_with_the_half_life_and_lifetime_does_not() {
    new_test_ext(vec![(1, 0, 1_000_000)]).execute_with(|| {
        // Genesis credit is recorded at block 0; one block later it has decayed by 2^(-1/100).
        let one_block = crate::decay::decay(1_000_000, 1, 100);
        assert_eq!(one_block, 993_096); // 10^6 · 2^(−655/65536), the fraction quantized to 1/2^16
        assert_eq!(ComputePower::ecp(&1), one_block * 6 / 10);
        System::set_block_number(0);
        assert_eq!(ComputePower::ecp(&1), 600_000);
        System::set_block_number(100);
        let p = ComputePower::compute_power(&1);
        assert_eq!(p.training, 500_000);
        assert_eq!(p.lifetime, 1_000_000);
        // Reading does not write: the stored record is still the genesis one.
        assert_eq!(Credits::<Test>::get(1).unwrap().updated_at, 0);
        // Writing decays first, then adds.
        ComputePower::credit(&1, WorkKind::Training, 500_000);
        let c = Credits::<Test>::get(1).unwrap();
        assert_eq!((c.training, c.updated_at, c.lifetime), (1_000_000, 100, 1_500_000));
        System::set_block_number(300);
        assert_eq!(ComputePower::compute_power(&1).training, 250_000);
        assert_eq!(TotalLifetime::<Test>::get(), 1_500_000);
    });
}

#[test]
fn zero_credit_is_ignored_and_extremes_saturate() {
    new_test_ext(vec![]).execute_with(|| {
        ComputePower::credit(&1, WorkKind::Drilling, 0);
        assert!(Credits::<Test>::get(1).is_none());
        assert!(System::events().is_empty());
        ComputePower::credit(&1, WorkKind::Drilling, u128::MAX);
        ComputePower::credit(&1, WorkKind::Drilling, u128::MAX);
        ComputePower::credit(&1, WorkKind::Training, u128::MAX);
        let p = ComputePower::compute_power(&1);
        assert_eq!(p.drilling, u128::MAX);
        assert_eq!(p.lifetime, u128::MAX);
        assert!(p.ecp >= u128::MAX / 10 * 9, "ECP saturates instead of wrapping");
    });
}

#[test]
fn top_trainers_orders_by_decayed_ecp() {
    new_test_ext(vec![(1, 100, 0), (2, 0, 100), (3, 800, 0), (4, 0, 0)]).execute_with(|| {
        System::set_block_number(0);
        let top: Vec<_> =
            ComputePower::top_trainers(10).into_iter().map(|(w, p)| (w, p.ecp)).collect();
        assert_eq!(top, vec![(3, 320), (2, 60), (1, 40), (4, 0)]);
        assert_eq!(ComputePower::top_trainers(2).len(), 2);
        // After two half-lives, fresh credit outranks old credit of the same size.
        System::set_block_number(200);
        ComputePower::credit(&1, WorkKind::Drilling, 800);
        assert_eq!(ComputePower::top_trainers(1)[0].0, 1);
    });
}
