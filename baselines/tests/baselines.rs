//! Baselines show their structural limits on the facility families.

use audita_baselines::{anomaly, metrics, shapley, single_site, FacilityIncident};
use audita_facility::oracle::truth;
use audita_facility::scenario::{generate, Family};

#[test]
fn single_site_cannot_split_redundancy() {
    let sc = generate(Family::Redundancy, 0);
    let p = single_site::score(&FacilityIncident::new(&sc));
    assert_eq!(p["planner-1"], 0.0);
    assert_eq!(p["planner-2"], 0.0);
    assert_eq!(p["dispatcher"], 1.0);
}

#[test]
fn single_site_cannot_see_omissions() {
    let sc = generate(Family::Omission, 0);
    let p = single_site::score(&FacilityIncident::new(&sc));
    assert_eq!(p["supervisor"], 0.0);
    assert_eq!(p["planner-1"], 1.0);
}

#[test]
fn shapley_is_efficient_and_blind_to_duty() {
    for family in Family::ALL {
        let sc = generate(family, 2);
        let inc = FacilityIncident::new(&sc);
        let phi = shapley::values(&inc).unwrap();
        let total: f64 = phi.iter().sum();
        let t = truth(&sc.spec).unwrap();
        let adverse = t.adverse.is_some();
        // v(N) − v(∅): only no-cause incidents are adverse with every message deleted.
        let expected = if adverse && family != Family::NoCause {
            1.0
        } else {
            0.0
        };
        assert!(
            (total - expected).abs() < 1e-9,
            "{}: {total}",
            family.name()
        );
    }
    let sc = generate(Family::Omission, 0);
    let p = shapley::score(&FacilityIncident::new(&sc)).unwrap();
    assert_eq!(p["supervisor"], 0.0);
}

#[test]
fn anomaly_detector_always_names_someone() {
    for seed in 0..10 {
        let sc = generate(Family::NoCause, seed);
        let t = truth(&sc.spec).unwrap();
        assert!(!metrics::names_someone(&t.culpable));
        let p = anomaly::score(&FacilityIncident::new(&sc));
        assert!(metrics::names_someone(&p));
        assert_eq!(
            single_site::score(&FacilityIncident::new(&sc))
                .values()
                .sum::<f64>(),
            0.0
        );
    }
}
