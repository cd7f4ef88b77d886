use audita_causal::{attribute, attribute_with, AttributeOptions, Model, Path};

#[test]
fn spec_example() {
    let m = Model::from_json(
        r#"{"variables": {
   "m_a1": {"principal": "planner-1", "value": true},
   "m_a2": {"principal": "planner-2", "value": true},
   "m_d":  {"principal": "dispatcher", "eq": "m_a1 | m_a2"},
   "quake": {"principal": null, "value": true, "candidate": false}},
 "outcome": "m_d & !quake"}"#,
    )
    .unwrap();
    let a = attribute(&m).unwrap();
    println!("{}", a.to_json());
    assert!(!a.outcome);
    let m = Model::from_json(
        r#"{"variables": {
   "m_a1": {"principal": "planner-1", "value": true},
   "m_a2": {"principal": "planner-2", "value": true},
   "m_d":  {"principal": "dispatcher", "eq": "m_a1 | m_a2"},
   "quake": {"principal": null, "value": false, "candidate": false}},
 "outcome": "m_d & !quake"}"#,
    )
    .unwrap();
    assert!(m.is_monotone());
    let a = attribute(&m).unwrap();
    println!("{}", a.to_json());
    let g = attribute_with(
        &m,
        &[],
        &AttributeOptions {
            path: Path::General,
            ..Default::default()
        },
    )
    .unwrap();
    println!("{}", g.to_json());
    assert_eq!(a.to_json(), g.to_json());
    assert_eq!(a.responsibility_of("planner-1"), 0.5);
    assert_eq!(a.responsibility_of("dispatcher"), 1.0);
}
