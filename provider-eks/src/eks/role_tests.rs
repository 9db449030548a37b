use super::*;

fn spec() -> RoleParameters {
    RoleParameters {
        assumed_by: "eks.amazonaws.com".into(),
        policy_arns: vec!["arn:aws:iam::aws:policy/AmazonEKSClusterPolicy".into()],
        inline_policy: None,
        tags: BTreeMap::new(),
    }
}

#[test]
fn a_role_as_specified_has_no_drift() {
    let observed = ObservedRole {
        trust: Some(trust_policy("eks.amazonaws.com")),
        attached: spec().policy_arns.into_iter().collect(),
        ..Default::default()
    };
    assert!(role_drift(&spec(), &observed).is_empty());
}

#[test]
fn policies_are_attached_and_detached_and_the_trust_and_inline_policy_rewritten() {
    let mut wanted = spec();
    wanted.assumed_by = "pods.eks.amazonaws.com".into();
    wanted.inline_policy = Some(r#"{"Version":"2012-10-17","Statement":[]}"#.into());
    let observed = ObservedRole {
        trust: Some(trust_policy("eks.amazonaws.com")),
        attached: ["arn:aws:iam::aws:policy/Old".to_string()].into(),
        ..Default::default()
    };
    let drift = role_drift(&wanted, &observed);
    assert_eq!(drift.attach, wanted.policy_arns);
    assert_eq!(drift.detach, vec!["arn:aws:iam::aws:policy/Old".to_string()]);
    assert!(drift.trust.unwrap().contains("sts:TagSession"));
    assert_eq!(drift.inline, Some(wanted.inline_policy.clone()));
}

#[test]
fn documents_are_compared_as_json_not_as_text() {
    let encoded = "%7B%22Version%22%3A%20%222012-10-17%22%2C%22Statement%22%3A%5B%5D%7D";
    assert_eq!(
        decode_document(encoded),
        Some(json!({"Version": "2012-10-17", "Statement": []}))
    );
}

#[test]
fn bad_specs_are_refused_naming_the_field() {
    let cases = [
        (
            "r",
            RoleParameters {
                assumed_by: "eks".into(),
                ..spec()
            },
            "spec.forProvider.assumedBy",
        ),
        (
            "r",
            RoleParameters {
                policy_arns: vec!["AmazonEKSClusterPolicy".into()],
                ..spec()
            },
            "spec.forProvider.policyArns[0]",
        ),
        (
            "r",
            RoleParameters {
                inline_policy: Some("{".into()),
                ..spec()
            },
            "spec.forProvider.inlinePolicy",
        ),
        ("a/b", spec(), "metadata.name"),
    ];
    for (name, s, field) in cases {
        let err = validate(name, &s).unwrap_err();
        assert!(err.to_string().starts_with(field), "{err}");
    }
    assert_eq!(validate("ok-role", &spec()), Ok(()));
}
